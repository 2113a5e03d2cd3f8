"""The platform's scripts (``include/scripts/``, not in the package), checked without starting
what they start: the Kafka broker's cluster ids."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_a_new_cluster_id_never_reads_as_an_option():
    """The broker's format tool takes the id after ``-t``; one starting with ``-``
    failed a CI run.
    """
    import base64

    from kafka_server import cluster_id  # include/scripts

    ids = [cluster_id() for _ in range(3000)]  # about 47 of them would start with "-" unfiltered
    assert not [found for found in ids if found.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(found + "==")) == 16 for found in ids) and len(
        set(ids)
    ) == len(ids)
