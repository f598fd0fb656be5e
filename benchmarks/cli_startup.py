"""How soon the command line answers: ``convergence --help`` and a remote ``stack list``.

    python benchmarks/cli_startup.py [--repeats 5] [--stacks 3]

Starts ``convergence api`` as a real process on a loopback port (a SQLite file of its own in a
temporary folder), creates ``--stacks`` small stacks through it, then runs each command
``--repeats`` times as a fresh process (``sys.executable -m convergence ...``, so the
interpreter's own start is counted, as a user's shell counts it) and prints the best and the
median wall time of each:

- ``--help``: the root group's help, which loads no store, engine, queue or web library;
- ``stack list`` with ``CONVERGENCE_URL`` set: the HTTP client only (remote mode);
- ``stack list`` embedded, on the same SQLite file: the store, the engine and the runtime.

The figures are not asserted anywhere (``tests/cli/test_startup.py`` checks what is imported
instead); the targets are ``--help`` under 0.3 s and a remote ``stack list`` under 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TEMPLATE = "heat_template_version: 2018-08-31\nresources:\n  one: {type: OS::Heat::None}\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wall_times(argv: list[str], env: dict[str, str], repeats: int) -> list[float]:
    """Seconds each of ``repeats`` runs of ``argv`` took (each must exit 0)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n"
                             f"{done.stderr.decode(errors='replace')}")
    return times


def wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the API did not start:\n" + log.read_text())
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="Runs of each command.")
    parser.add_argument("--stacks", type=int, default=3, help="Stacks to list.")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "convergence"]
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as folder:
        env = {**os.environ, "CONVERGENCE_DATABASE_URL": f"sqlite:///{folder}/api.db",
               "CONVERGENCE_DATA_DIR": f"{folder}/data"}
        for name in ("CONVERGENCE_BROKER_URL", "CONVERGENCE_URL", "CONVERGENCE_PROJECT_ID"):
            env.pop(name, None)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = Path(folder, "api.log")
        with log.open("wb") as out:
            server = subprocess.Popen([*cli, "api", "--port", str(port)], env=env,
                                      stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until_up(url, server, log)
            for i in range(args.stacks):
                httpx.post(f"{url}/v1/default/stacks", json={
                    "stack_name": f"s{i}", "template": TEMPLATE}, timeout=30).raise_for_status()
            remote = {**env, "CONVERGENCE_URL": url}
            runs = {
                "convergence --help": wall_times([*cli, "--help"], env, args.repeats),
                "convergence stack list (remote)": wall_times([*cli, "stack", "list"], remote,
                                                              args.repeats),
                "convergence stack list (embedded)": wall_times([*cli, "stack", "list"], env,
                                                                args.repeats),
            }
        finally:
            server.terminate()
            server.wait(10)
    print(f"{'command':36} {'best':>7} {'median':>7}  ({args.repeats} runs)")
    for label, times in runs.items():
        print(f"{label:36} {min(times):7.3f} {statistics.median(times):7.3f}")


if __name__ == "__main__":
    main()
