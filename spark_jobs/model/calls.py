"""What a Spark task asks of the platform: one typed call per command that writes (run, backfill,
rollback, refresh, maintain).

The CLI builds a call from its command line; an Airflow task builds one from its (templated)
options. A task that submits its own Spark application gives spark-submit the call's command
line (:meth:`Call.argv`), which the CLI in that driver parses back into the same call; a task on
its DAG run's shared driver sends the call itself (:meth:`Call.to_wire`). Either way one function,
:func:`spark_jobs.calls.perform`, runs the call's service function and prints its result.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from spark_jobs.model.errors import UsageError

QUALITY_MODES = ("gate", "report", "off")


def _switch(default: bool = False) -> Any:
    """A flag that is only ever turned on (``--dry-run``): absent from the command line when off."""
    return field(default=default, metadata={"switch": True})


def flag_of(option: dataclasses.Field) -> str:
    """The CLI's flag of a call's option: ``--`` and its name with ``-`` for ``_``, unless the
    option names its own (``wait_s`` is ``--wait``)."""
    return option.metadata.get("flag") or "--" + option.name.replace("_", "-")


@dataclass(frozen=True, kw_only=True)
class Call:
    """A call's pipeline and how long it waits for another writer's lock; the subclasses add the
    command's own options, each the CLI's ``--flag`` of the same name (``_`` as ``-``)."""

    COMMAND: ClassVar[str]
    pipeline: str
    wait_s: float = field(default=0.0, metadata={"flag": "--wait"})

    def argv(self) -> list[str]:
        """The ``lakehouse`` command line that the CLI parses back into this call: every option
        that is set, as ``--flag=value`` (so a value is never taken for a flag), a yes/no option
        as ``--flag`` or ``--no-flag``, a switch only when on."""
        argv = [self.COMMAND, self.pipeline]
        options = [each for each in dataclasses.fields(self) if each.name != "pipeline"]
        # the command's own options first, how long it waits last
        for each in sorted(options, key=lambda option: option.name == "wait_s"):
            value = getattr(self, each.name)
            if value is None:
                continue
            flag = flag_of(each)
            if each.metadata.get("switch"):
                argv += [flag] if value else []
            elif isinstance(value, bool):
                argv.append(flag if value else f"--no-{flag[2:]}")
            else:
                argv.append(f"{flag}={value:g}" if isinstance(value, float) else f"{flag}={value}")
        return argv

    def to_wire(self) -> dict[str, Any]:
        """The call as JSON-ready values, with its command."""
        return {"command": self.COMMAND, **dataclasses.asdict(self)}

    @staticmethod
    def from_wire(document: dict[str, Any]) -> Call:
        """The call :meth:`to_wire` wrote.

        :raises UsageError: an unknown command or option.
        """
        values = dict(document)
        return build(str(values.pop("command", "")), **values)


@dataclass(frozen=True, kw_only=True)
class RunCall(Call):
    """``lakehouse run``: process what is new, run-once (or always-on with ``continuous``)."""

    COMMAND: ClassVar[str] = "run"
    hop: str = "all"
    run_id: str | None = None
    quality: str = "gate"
    max_files_per_trigger: int | None = None
    continuous: bool = _switch()
    trigger_interval: str | None = None


@dataclass(frozen=True, kw_only=True)
class BackfillCall(Call):
    """``lakehouse backfill``: recompute ``[start, end)`` (ISO-8601 text) in batch mode."""

    COMMAND: ClassVar[str] = "backfill"
    start: str
    end: str
    hop: str = "all"
    run_id: str | None = None
    quality: str = "gate"


@dataclass(frozen=True, kw_only=True)
class RollbackCall(Call):
    """``lakehouse rollback``: undo a hop's batches after exactly one target (a batch, a run or a
    time, as ISO-8601 text)."""

    COMMAND: ClassVar[str] = "rollback"
    hop: str
    to_batch: int | None = None
    to_run: str | None = None
    to_time: str | None = None
    cascade: bool = True
    replan: bool = False
    exact: bool = False
    dry_run: bool = _switch()


@dataclass(frozen=True, kw_only=True)
class RefreshCall(Call):
    """``lakehouse refresh``: roll a hop back to the start (or ``from_time``) and run it with the
    code as it is now."""

    COMMAND: ClassVar[str] = "refresh"
    hop: str
    from_time: str | None = field(default=None, metadata={"flag": "--from"})
    dry_run: bool = _switch()
    quality: str = "gate"


@dataclass(frozen=True, kw_only=True)
class MaintainCall(Call):
    """``lakehouse maintain``: compact, vacuum and prune a pipeline's tables and records."""

    COMMAND: ClassVar[str] = "maintain"
    hop: str = "all"
    dry_run: bool = _switch()


CALLS: dict[str, type[Call]] = {
    kind.COMMAND: kind for kind in (RunCall, BackfillCall, RollbackCall, RefreshCall, MaintainCall)
}


def build(command: str, **options: Any) -> Call:
    """The call of ``command`` with ``options``, each value taken as the option's type: text as
    Airflow renders a template (``"4"``, ``"True"``, ``""`` for none) is read as the option's
    number, yes/no or absence.

    :raises UsageError: an unknown command or option, or a value that is not of its type.
    """
    kind = CALLS.get(command)
    if kind is None:
        raise UsageError(f"{command!r} is not a command a task can send: one of {', '.join(CALLS)}")
    hints = typing.get_type_hints(kind)
    known = {each.name for each in dataclasses.fields(kind)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"lakehouse {command} has no option {', '.join(unknown)}")
    typed = {name: _typed(command, name, value, hints[name]) for name, value in options.items()}
    return kind(**typed)


def _typed(command: str, name: str, value: Any, hint: Any) -> Any:
    """``value`` as ``hint`` (``int``, ``float``, ``bool``, ``str``, or one of them or ``None``)."""
    kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None or (value == "" and type(None) in kinds):
        return None
    kind = next(each for each in kinds if each is not type(None))
    if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
        return value
    text = str(value).strip()
    try:
        if kind is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no", ""):
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        raise UsageError(
            f"lakehouse {command}: {name.replace('_', '-')} must be a{'n' if kind is int else ''} "
            f"{kind.__name__}, not {value!r}"
        ) from None
