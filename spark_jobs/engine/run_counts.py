"""What a run counts as it writes, without jobs of its own: the quality gate's counts of the rows
written (:class:`GateCounts`, so the gate reads nothing back) and the rows the suite's ``drop``
rules take out (:class:`DropRules`, by rule, for the run record)."""

from __future__ import annotations

import time

from spark_jobs.control import suites
from spark_jobs.engine import quality


def completed(observations: list) -> list:
    """The observations whose frame ran (asking one that never ran for its metrics
    would wait forever).
    """
    return [observation for observation in observations if observation._jo.future().isCompleted()]


def observed_total(observations: list, name: str) -> int:
    """The sum of metric ``name`` over the observations whose frame ran. A metrics row without a
    schema is a frame Spark found empty before running it (its plan pruned to no relation)."""
    total = 0
    for observation in completed(observations):
        if observation._jo.getRow().schema() is not None:
            total += int(observation.get.get(name) or 0)
    return total


class GateCounts:
    """The gate's counts of the rows a run writes, by the hop's suite, when every rule can be
    counted as rows are written. ``gated`` False: no counting (``--quality=off``; a later
    ``lakehouse quality`` reads the rows back)."""

    def __init__(self, spec, hop, code, gated: bool = True):
        self.spec, self.hop, self.code = spec, hop, code
        self._counts: dict | None = None
        # Their columns, once the first batch's frame said if it can.
        self._counting: list | None = None if gated else []

    @property
    def totals(self) -> dict | None:
        """What the record keeps: the counts, when at least one batch was counted."""
        return self._counts if self._counts and self._counts["batches"] else None

    def _columns(self, frame, keys: tuple[str, ...]) -> list:
        """The gate's counts as aggregate columns (:func:`quality.counted_rules`), decided on the
        first batch's frame; empty when a rule cannot be counted as rows are written."""
        if self._counting is None:
            suite = suites.load_suite(self.spec, self.hop)
            columns = quality.counted_rules(suite, self.code.quality_frame(self.hop, frame), keys)
            self._counting = [] if columns is None else columns
            self._counts = (
                None if columns is None else {"suite": quality.suite_digest(suite), "batches": 0}
            )
        return self._counting if self._counts is not None else []

    def counting(self, frame):
        """``(frame, observation)``: the rows a batch writes, counted as they are written
        (``DataFrame.observe``: no job of its own) when every rule can be counted so; else
        ``(frame, None)``. After the write, :meth:`counted` takes the counts."""
        columns = self._columns(frame, ())
        if not columns:
            return frame, None
        from pyspark.sql import Observation

        observation = Observation()
        checked = self.code.quality_frame(self.hop, frame).observe(observation, *columns)
        return checked.select(*frame.columns), observation

    def counted(self, observation) -> None:
        """Add what ``observation`` counted as its batch was written. None came when Delta skipped
        the write (a batch committed before): the run's counts are dropped, and the gate reads the
        rows back."""
        if observation is None or self._counts is None:
            return
        if not observation._jo.future().isCompleted():
            self._counts = None
            return
        self._add(observation.get)

    def count_now(self, frame, keys: tuple[str, ...]) -> None:
        """Count the rows a MERGE just wrote (``frame``, its source, cached: one small job over
        the cache; Spark does not observe a MERGE's source). Its table holds each of ``keys``
        once, but a key two batches change would be counted twice: counts hold for a run of one
        batch only. A MERGE that Delta skipped leaves the counts apart from the table's, so the
        gate reads the rows back."""
        columns = self._columns(frame, keys)
        if not columns:
            return
        if self._counts["batches"]:
            self._counts = None
            return
        began = time.time()
        totals = self.code.quality_frame(self.hop, frame).agg(*columns).first().asDict()
        # the gate's time, spent here
        self._add(dict(totals, seconds=round(time.time() - began, 3)))

    def _add(self, totals: dict) -> None:
        for name, value in totals.items():
            self._counts[name] = (
                value if self._counts.get(name) is None else self._counts[name] + (value or 0)
            )
        self._counts["batches"] += 1


class DropRules:
    """The suite's ``drop`` rules of a hop: rows failing one go to the quarantine with the rule's
    name, counted by rule as the quarantine's write runs."""

    def __init__(self, spec, hop, quarantine: str | None):
        self.rules = suites.hop_drop_rules(spec, hop, quarantine)
        self._observations: list = []

    def drop_failing(self, kept, quarantined, keep: tuple[str, ...]):
        """Apply the rules: failing rows join the quarantine rows, with the rule."""
        if not self.rules:
            return kept, quarantined
        kept, dropped = quality.split_by_rules(kept, self.rules)
        dropped = quality.as_quarantine_rows(dropped, kept.columns, keep)
        return kept, dropped if quarantined is None else quarantined.unionByName(dropped)

    def counting(self, quarantine_rows):
        """``quarantine_rows`` as the quarantine's write takes them, the rules' rows counted as
        that write runs (:func:`~spark_jobs.engine.quality.observe_drops`)."""
        if not self.rules:
            return quarantine_rows
        quarantine_rows, observation = quality.observe_drops(quarantine_rows, self.rules)
        self._observations.append(observation)
        return quarantine_rows

    def by_rule(self) -> dict[str, int]:
        """What the rules took out, by rule, summed over the writes that happened (a write Delta
        skipped, a batch committed before, counted nothing)."""
        totals = {suites.rule_name(rule): 0 for rule in self.rules}
        for observation in completed(self._observations):
            for name, count in observation.get.items():
                totals[name] = totals.get(name, 0) + int(count or 0)
        return totals
