"""Errors a user can act on. Each carries the fix and surfaces as one line in the CLI."""

from __future__ import annotations


class LakehouseError(Exception):
    """A problem with the request or the machine; the CLI exits with :attr:`exit_code`.

    :param message: what is wrong and how to fix it, in one line.
    """

    exit_code = 2


class UsageError(LakehouseError):
    """Bad arguments: unknown pipeline or hop, unparseable dates, an empty range."""


class SetupError(LakehouseError):
    """The machine lacks something: Java, the Delta jars."""


class RunFailed(LakehouseError):
    """A Spark job started and failed; its run record says where."""

    exit_code = 1
