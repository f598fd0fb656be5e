"""A real ``convergence api`` process for tests that talk to it over HTTP (openstacksdk, the
openstack CLI, the CLI's remote mode): a free loopback port, a SQLite file of its own, and its
log shown when it does not start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def api_process(folder: Path, database: str = "api.db",
                env_updates: dict[str, str | None] | None = None,
                ) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """Start ``convergence api`` on the embedded store in ``folder`` (``env_updates``: the
    variables to set, or with None to unset); yield the process, its base URL and its log."""
    port = free_port()
    env = {**os.environ, "CONVERGENCE_DATABASE_URL": f"sqlite:///{folder / database}",
           "CONVERGENCE_DATA_DIR": str(folder / "data")}
    env.pop("CONVERGENCE_BROKER_URL", None)
    for name, value in (env_updates or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    log_path = folder / f"{database}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "convergence", "api", "--port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90  # a loaded machine starts it slowly
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the API did not start:\n" + log_path.read_text())
                time.sleep(0.1)
            yield proc, url, log_path
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            proc.wait()


@contextmanager
def running_api(folder: Path, database: str = "api.db") -> Iterator[str]:
    """Start ``convergence api`` on the embedded store in ``folder``; yield its base URL."""
    with api_process(folder, database) as (_, url, _log):
        yield url
