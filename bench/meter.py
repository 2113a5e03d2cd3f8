"""Run a command and report the CPU it and all its descendants used, as one JSON line.

The meter makes itself a child subreaper, so processes its command starts and leaves
behind (pyspark's JVM outlives the Python that launched it by a moment) are re-parented to
it and reaped here: ``getrusage(RUSAGE_CHILDREN)`` then counts every one of them. A sampler
records the names of the processes seen, which is how a benchmark confirms that no JVM ran, and
each one's CPU seconds as last seen: the total's split by process (:func:`by_process`).

    python -m bench.meter [--stop-after SECONDS] -- COMMAND...

``--stop-after`` sends SIGTERM to the command after that many seconds (an always-on job).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import signal
import subprocess
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
# How often the sampler walks the process tree: every 50 ms it used about 0.14 of a core beside a
# half-hour platform (not counted, but it shares the cores it measures); a process that lives
# less than this lands in ``(not sampled)``.
SAMPLE_EVERY_S = 0.2


def _group(name: str) -> str:
    """A process's name without what tells its instances apart (``airflow worker -- <id>``),
    cut to the 15 characters a kernel keeps of a name."""
    return name.split(" -- ")[0][:15].strip()


def _sample_descendants(
    pid: int, seen: set[str], cpu: dict[tuple, tuple[str, float]], stop: threading.Event
) -> None:
    """Every ``SAMPLE_EVERY_S``: the name of each descendant, and the CPU seconds it has used so far
    (keyed by pid and start time: a pid used again is another process)."""
    import psutil

    me = psutil.Process(pid)
    while not stop.is_set():
        try:
            for child in me.children(recursive=True):
                try:
                    with child.oneshot():
                        name, times = child.name(), child.cpu_times()
                    seen.add(name)
                    cpu[child.pid, child.create_time()] = (_group(name), times.user + times.system)
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        stop.wait(SAMPLE_EVERY_S)


def by_process(cpu: dict[tuple, tuple[str, float]], total: float) -> dict[str, float]:
    """CPU seconds per process group, largest first, as last sampled; ``(not sampled)`` is the
    rest of ``total``: what processes used after their last sample (``SAMPLE_EVERY_S`` of wall at
    most each), or in their whole life when it was shorter than a sample."""
    groups: dict[str, float] = {}
    for name, seconds in cpu.values():
        groups[name] = groups.get(name, 0.0) + seconds
    found = {
        name: round(seconds, 1)
        for name, seconds in sorted(groups.items(), key=lambda item: -item[1])
    }
    found["(not sampled)"] = round(max(total - sum(groups.values()), 0.0), 1)
    return found


def _reap_all(deadline_s: float = 120.0) -> None:
    """Wait for every left-behind descendant; after ``deadline_s``, SIGKILL what is left."""
    import psutil

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                for child in psutil.Process().children():
                    child.kill()
                deadline = float("inf")
            time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-after", type=float)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    seen: set[str] = set()
    cpu: dict[tuple, tuple[str, float]] = {}
    stop = threading.Event()
    sampler = threading.Thread(
        target=_sample_descendants, args=(os.getpid(), seen, cpu, stop), daemon=True
    )
    sampler.start()
    began = time.perf_counter()
    child = subprocess.Popen(command)
    try:
        code = child.wait(timeout=args.stop_after)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=300)
    wall = time.perf_counter() - began
    _reap_all()  # orphans of the command (the JVM) end here, and their CPU joins RUSAGE_CHILDREN
    stop.set()  # only now: an orphan still running after its parent ended is seen too
    sampler.join()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    print(
        json.dumps(
            {
                "exit_code": code,
                "wall_s": round(wall, 3),
                "cpu_s": round(total, 3),
                "processes": sorted(seen),
                "cpu_s_by_process": by_process(cpu, total),
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
