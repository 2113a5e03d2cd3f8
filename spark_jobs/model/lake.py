"""Where things live under ``LAKEHOUSE_HOME`` (docs/examples/ad_events.md), as plain strings.

``LAKEHOUSE_HOME`` is a local path or a URI; file reads outside Spark go through
:mod:`spark_jobs.logs.fs` so the same code serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model import settings
from spark_jobs.model.spec import HopSpec, PipelineSpec, get_spec


def lakehouse_home(create: bool = True) -> str:
    """``$LAKEHOUSE_HOME`` (default ``./.lakehouse``), absolute for local paths, created if missing.

    An S3 lake is spelt ``s3a://bucket/prefix`` everywhere (``s3://`` is accepted and rewritten):
    Spark's file-source logs and Delta's logs record the paths they read, and one spelling for all
    of them keeps them comparable (a stream that read ``s3a://`` paths refuses an ``s3://`` source).
    """
    home = settings.HOME.value()
    if home.startswith("s3://"):
        home = "s3a://" + home[len("s3://") :]
    if "://" not in home:
        home = str(Path(home).expanduser().resolve())
        if create:
            Path(home).mkdir(parents=True, exist_ok=True)
    return home.rstrip("/")


@dataclass(frozen=True)
class Lake:
    """The paths of one pipeline's data, checkpoints and records."""

    home: str
    spec: PipelineSpec

    @classmethod
    def open(cls, spec: PipelineSpec) -> Lake:
        return cls(lakehouse_home(), spec)

    @classmethod
    def named(cls, pipeline: str) -> Lake:
        """The lake of the pipeline called ``pipeline`` (a :class:`UsageError` naming
        the known ones).
        """
        return cls.open(get_spec(pipeline))

    def path(self, relative: str) -> str:
        return f"{self.home}/{relative}"

    def landing_of(self, hop: HopSpec) -> str:
        """The landing folder the ingest ``hop`` reads."""
        return self.path(self.spec.landing_of(hop))

    def archive_of(self, hop: HopSpec) -> str:
        """Where ``retention.expired_landing: archive`` moves the ingest ``hop``'s landing files:
        ``_archive/<the landing folder>`` in the lake, the same names below it (a
        backfill reads it too)."""
        return self.path(f"_archive/{self.spec.landing_of(hop)}")

    @property
    def landing(self) -> str:
        """The first ingest hop's landing folder (a pipeline with one source has only this one)."""
        return self.path(next(iter(self.spec.landings.values())))

    def input(self, name: str) -> str:
        """Where the pipeline's static input ``name`` lives (``inputs:`` in its spec)."""
        return self.path(self.spec.input(name))

    def table(self, hop: HopSpec) -> str:
        return self.path(hop.table)

    def quarantine(self, hop: HopSpec) -> str | None:
        return self.path(hop.quarantine) if hop.quarantine else None

    def deleted_keys(self, hop: HopSpec) -> str | None:
        """A changes hop's memory of its deleted keys (each key whose latest change is a delete,
        with that change's sequence), beside its table: what lets a batch apply from the table's
        rows instead of the whole feed. None for a hop that keeps none."""
        if hop.changes is None or not hop.changes.remembers_deletes:
            return None
        return self.path(f"{hop.table}_deleted_keys")

    def checkpoint(self, hop: HopSpec) -> str:
        return self.path(f"checkpoints/{self.spec.name}/{hop.name}")

    @property
    def runs(self) -> str:
        return self.path(f"_ops/runs/{self.spec.name}")

    @property
    def rollbacks(self) -> str:
        return self.path(f"_ops/rollbacks/{self.spec.name}")

    @property
    def maintenance(self) -> str:
        return self.path(f"_ops/maintenance/{self.spec.name}")

    @property
    def replays(self) -> str:
        return self.path(f"_ops/replays/{self.spec.name}")

    @property
    def alerts(self) -> str:
        return self.path(f"_ops/alerts/{self.spec.name}")

    @property
    def refusals(self) -> str:
        return self.path(f"_ops/refusals/{self.spec.name}")

    @property
    def events(self) -> str:
        """The event log: one Delta table for every pipeline of the lake
        (:mod:`spark_jobs.logs.event_log`)."""
        return self.path("_ops/events")

    @property
    def locks(self) -> str:
        return self.path("_ops/locks")

    def tables_of(self, hop: HopSpec) -> list[str]:
        """Every table the hop writes: its own and, for ingest hops, the quarantine, for changes
        hops the deleted keys (rollback restores and maintenance keeps each of them)."""
        others = [self.quarantine(hop), self.deleted_keys(hop)]
        return [self.table(hop)] + [table for table in others if table]
