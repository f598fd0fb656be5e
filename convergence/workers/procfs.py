"""Whether a process has ended, asked of the system (``/proc``, else the kernel).

Caller: the pool watch (``convergence.workers.pool``), for the pool processes of a prefork
node, since billiard may not have reaped a dead one yet (or another reaper did).
"""

from __future__ import annotations

import os


def exited(pid: int) -> bool:
    """Whether a child process has ended: gone, or a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return state(stat.read()) in (b"Z", b"X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc here: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def state(stat: bytes) -> bytes:
    """The state letter of a ``/proc/<pid>/stat`` line: "pid (comm) state ...", where the
    state follows the last parenthesis (``comm`` may hold any character)."""
    return stat.rsplit(b")", 1)[1].split()[0]
