"""Entry script for ``spark-submit``: the same CLI, run inside the submitted driver; or, with
``serve`` first, a shared driver that runs the CLI commands the tasks of a DAG run send it
(:mod:`spark_jobs.shared_driver`)."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        from spark_jobs.shared_driver import main as serve

        sys.exit(serve(sys.argv[2:]))
    from spark_jobs.cli import main

    sys.exit(main())
