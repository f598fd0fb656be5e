"""``convergence.workers.procfs``: how the pool watch tells that a pool process has ended."""

from __future__ import annotations

import os
import subprocess
import sys

from convergence.workers.procfs import exited, state


def test_the_state_follows_the_last_parenthesis_of_the_command_name() -> None:
    assert state(b"42 (python) S 1 42 42 0") == b"S"
    assert state(b"42 (a) Z (b)) Z 1 42") == b"Z"


def test_a_running_process_has_not_exited() -> None:
    assert not exited(os.getpid())


def test_a_zombie_and_a_reaped_child_have_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: a zombie
    assert exited(child.pid)
    child.wait()
    assert exited(child.pid)
