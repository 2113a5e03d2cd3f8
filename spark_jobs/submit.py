"""Entry script for ``spark-submit``: the same CLI, run inside the submitted driver."""

import sys

from spark_jobs.cli import main

if __name__ == "__main__":
    sys.exit(main())
