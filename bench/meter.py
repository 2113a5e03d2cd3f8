"""Run a command and report the CPU it and all its descendants used, as one JSON line.

The meter makes itself a child subreaper, so processes its command starts and leaves
behind (pyspark's JVM outlives the Python that launched it by a moment) are re-parented to
it and reaped here: ``getrusage(RUSAGE_CHILDREN)`` then counts every one of them. A sampler
records the names of the processes seen, which is how a benchmark confirms that no JVM ran.

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


def _descendant_names(pid: int, seen: set[str], stop: threading.Event) -> None:
    import psutil

    me = psutil.Process(pid)
    while not stop.is_set():
        try:
            for child in me.children(recursive=True):
                try:
                    seen.add(child.name())
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        stop.wait(0.05)


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
    stop = threading.Event()
    sampler = threading.Thread(target=_descendant_names, args=(os.getpid(), seen, stop), daemon=True)
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
    print(json.dumps({"exit_code": code, "wall_s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                      "processes": sorted(seen)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
