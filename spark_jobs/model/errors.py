"""Every error a user can act on, in one place. Each carries the fix in its one-line message and
surfaces as one line in the CLI (``error: ...``), exiting with its :attr:`exit_code`."""

from __future__ import annotations


class LakehouseError(Exception):
    """A problem with the request or the machine; the CLI exits with :attr:`exit_code`.

    :param message: what is wrong and how to fix it, in one line.
    """

    exit_code = 2


class UsageError(LakehouseError):
    """Bad arguments: unknown pipeline or hop, unparseable dates, an empty range, a bad spec."""


class SetupError(LakehouseError):
    """The machine lacks something: Java, the Delta jars."""


class PipelineBusy(LakehouseError):
    """Another run, backfill or rollback of the pipeline holds its lock."""


class RollbackRefused(LakehouseError):
    """The rollback cannot be done safely (retention, an unfinished rollback); nothing changed.

    :param plan: the refused :class:`~spark_jobs.control.rollback.plans.Plan`, when there is one
    (its ``refused`` says why).
    """

    def __init__(self, message: str, plan=None):
        super().__init__(message)
        self.plan = plan


class RunFailed(LakehouseError):
    """A Spark job started and failed; its run record says where."""

    exit_code = 1


class QualityGateFailed(RunFailed):
    """A ``fail`` rule of a hop's quality suite failed on the run's increment."""


class DataGone(LakehouseError):
    """What a hop's stream must read next is gone (a log version or a data file of its upstream
    table): nothing was read; the message names the command that recovers."""

    exit_code = 1


class CodeChanged(LakehouseError):
    """A hop's query changed in a way its checkpoint's state cannot follow; ``lakehouse refresh``
    recomputes with the new code (spark_jobs.control.fingerprint).

    :param hop: the hop whose state cannot follow.
    """

    def __init__(self, message: str, hop: str):
        super().__init__(message)
        self.hop = hop


class CheckpointDamaged(LakehouseError):
    """A checkpoint file is damaged or out of step; ``lakehouse checkpoint validate``
    says how to fix it.
    """


class DamagedLog(CheckpointDamaged, ValueError):
    """A checkpoint log file Spark could not read: empty, truncated, garbage or of an
    unknown version.
    """

    exit_code = 1

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason} (see `lakehouse checkpoint validate`)")
        self.path = path
        self.reason = reason
