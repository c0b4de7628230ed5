"""Child processes end with their parent: a killed `make bench` leaves no engine running.

A spawned worker (an engine under test, the fake server) outlives a parent killed with SIGKILL or
an interrupted `make`, holding a core and gigabytes of memory for as long as its work lasts. On
Linux the kernel can send the child a signal when its parent dies (`PR_SET_PDEATHSIG`); each child
asks for that first thing. Elsewhere this is a no-op (the parent's normal exit still ends daemons).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int | None = None) -> bool:
    """Ask the kernel to SIGTERM this process when its parent dies; True when that is in place.

    `parent_pid`: the parent as the parent saw itself; if it already died before the request was
    made (a race), this process ends at once instead of running on as an orphan.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def child_pool() -> ProcessPoolExecutor:
    """One spawned worker (its own memory peak, its own torch threads) that dies with this process."""
    return ProcessPoolExecutor(
        max_workers=1, mp_context=get_context("spawn"), initializer=die_with_parent, initargs=(os.getpid(),)
    )
