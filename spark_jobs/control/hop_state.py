"""One hop of one lake as one object: its spec, where its checkpoint, table and quarantine live,
and its checkpoint's batch ids read once. Every function of the control layer about one hop
takes it (rather than ``(lake, hop)`` and paths worked out again at each call); the rollback
planner's view of a hop and the engine's hop run are ones."""

from __future__ import annotations

from functools import cached_property

from spark_jobs.logs import checkpoint_log
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec, PipelineSpec


class HopState:
    """A hop in its lake. The paths never change; the batch ids are read on first use and kept,
    so a reader that must see new batches makes a new one."""

    def __init__(self, lake: Lake, hop: HopSpec):
        self.lake = lake
        self.hop = hop

    @cached_property
    def spec(self) -> PipelineSpec:
        """The pipeline's spec as the hop sees it (its own event time where it sets one)."""
        return self.lake.spec.for_hop(self.hop.name)

    @cached_property
    def checkpoint(self) -> str:
        return self.lake.checkpoint(self.hop)

    @cached_property
    def table(self) -> str:
        return self.lake.table(self.hop)

    @cached_property
    def quarantine(self) -> str | None:
        return self.lake.quarantine(self.hop)

    @cached_property
    def tables(self) -> list[str]:
        """Every table the hop writes: its own and its quarantine, if it has one."""
        return self.lake.tables_of(self.hop)

    @cached_property
    def offsets(self) -> list[int]:
        """The batch ids the checkpoint planned (``offsets/``), in order."""
        return checkpoint_log.offset_batch_ids(self.checkpoint)

    @cached_property
    def committed(self) -> list[int]:
        """The batch ids the checkpoint committed (``commits/``), in order."""
        return checkpoint_log.commit_batch_ids(self.checkpoint)
