"""Reading change events in an ingest hop's parse: Debezium's envelope to flat columns."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def debezium_columns(document: Column, fields: dict[str, str]) -> list[Column]:
    """The columns of a Debezium change event ``document`` (a variant: the envelope, or a message
    whose ``payload`` is one): each of ``fields`` (name: Spark type) from ``after``, or from
    ``before`` for a delete; ``op`` (``c`` insert, ``u`` update, ``d`` delete, ``r`` snapshot
    read); ``lsn`` (the source's log position, ``source.lsn``, a long: the sequence of a
    ``changes`` hop) and ``changed_at`` (``ts_ms`` as a timestamp). A field, ``op`` or ``lsn`` that
    is missing or of another type is null: the parse's checks quarantine such a row."""
    envelope = F.coalesce(F.try_variant_get(document, "$.payload", "variant"), document)
    image = F.when(
        F.try_variant_get(envelope, "$.op", "string") == "d",
        F.try_variant_get(envelope, "$.before", "variant"),
    ).otherwise(F.try_variant_get(envelope, "$.after", "variant"))
    return [
        *[F.try_variant_get(image, f"$.{name}", kind).alias(name) for name, kind in fields.items()],
        F.try_variant_get(envelope, "$.op", "string").alias("op"),
        F.try_variant_get(envelope, "$.source.lsn", "long").alias("lsn"),
        F.timestamp_millis(F.try_variant_get(envelope, "$.ts_ms", "long")).alias("changed_at"),
    ]
