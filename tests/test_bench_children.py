"""A killed `make bench` leaves no child behind: its spawned workers end with their parent."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

PARENT = """
import time
from supersede_lib.bench.children import child_pool

pool = child_pool()
pool.submit(time.sleep, 120)  # a long job, as an engine benchmark is
time.sleep(1)
print(next(iter(pool._processes)), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, counts as gone)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_benchmark_worker_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
    finally:
        parent.kill()  # SIGKILL: no atexit, no daemon clean-up in the parent
        parent.wait()
    deadline = time.monotonic() + 15
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child), "the worker outlived its killed parent"
