"""A second host for cross-host tests: a Linux network namespace of its own, reached from this one
only over a veth pair (its own loopback inside). Needs root and iproute2 (CI runs as root); a
test skips with the reason where either is missing or the kernel refuses."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Host:
    """The namespace ``name``: ``address`` is its end of the pair, ``ours`` this namespace's end;
    ``prefix`` runs a command there."""

    name: str
    address: str
    ours: str

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.name)


def _ip(*args: str, name: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(("ip", "netns", "exec", name) if name else ()), "ip", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


@contextmanager
def second_host() -> Iterator[Host]:
    """A new namespace with a veth pair to this one, removed (with the pair) afterwards."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("another host needs root and iproute2's `ip netns` (CI runs as root)")
    tag = os.getpid() % 50000
    name, ours_link, theirs_link = f"lh-host-{tag}", f"lh{tag}a", f"lh{tag}b"
    subnet = f"10.{200 + tag % 50}.{tag % 250}"
    ours, address = f"{subnet}.1", f"{subnet}.2"
    added = _ip("netns", "add", name)
    if added.returncode != 0:
        pytest.skip(f"`ip netns add` is refused here: {added.stderr.strip()}")
    try:
        for step, where in (
            (("link", "add", ours_link, "type", "veth", "peer", "name", theirs_link), None),
            (("link", "set", theirs_link, "netns", name), None),
            (("addr", "add", f"{ours}/24", "dev", ours_link), None),
            (("link", "set", ours_link, "up"), None),
            (("addr", "add", f"{address}/24", "dev", theirs_link), name),
            (("link", "set", theirs_link, "up"), name),
            (("link", "set", "lo", "up"), name),
        ):
            done = _ip(*step, name=where)
            if done.returncode != 0:
                pytest.skip(f"`ip {' '.join(step)}` is refused here: {done.stderr.strip()}")
        yield Host(name, address, ours)
    finally:
        _ip("link", "del", ours_link)  # the pair goes with either end
        _ip("netns", "del", name)
