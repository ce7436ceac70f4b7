"""Child processes that must not outlive their parent: the race's solver workers, the daemon's
scheduling process and its snapshot writer.

A parent killed with SIGKILL runs no cleanup, so a child it started would live on, idle and
holding memory, sockets or a share of a file lock. `die_with_parent` asks the Linux kernel to
SIGKILL the calling process when its parent exits (PR_SET_PDEATHSIG); elsewhere it only covers
the race in which the parent is gone already.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Be killed when the process `parent_pid` (this process's parent) exits; exit at once if
    it already has (the kernel's request covers only a parent alive when it is made)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)
