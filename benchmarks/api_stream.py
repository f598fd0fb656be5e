"""Latency of the events watch stream: from an event's commit to a connected SSE client.

    python benchmarks/api_stream.py                    # 5 stacks of 40 resources
    python benchmarks/api_stream.py --stacks 10 --resources 100
    python benchmarks/api_stream.py --poll-only        # no in-process wake-up: the 100 ms check

One process: the API served by uvicorn on a thread over an embedded runtime (SQLite in a
temporary folder, the dispatcher driven by the app), and an httpx client on another thread
reading ``GET /v1/{tenant}/events?watch=true``, connected before the stacks are created.
Latency per event = the client's receive time minus the event's ``created_at`` (read from the
store afterwards: the API's ``event_time`` has whole seconds only). ``created_at`` is stamped
when the recording transaction begins, so the figure includes that transaction's own duration.
``--poll-only`` unhooks the engine's notifier, as for events committed by other processes.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from convergence.api import stream
from convergence.api.app import create_app
from convergence.runtime import open_runtime
from convergence.settings import Settings


def template(n: int) -> dict[str, Any]:
    """``n`` test resources: chains of four, so events come in waves."""
    resources: dict[str, Any] = {}
    for i in range(n):
        props: dict[str, Any] = {"value": f"v{i}"}
        if i % 4:
            props["value"] = {"get_attr": [f"r{i - 1}", "output"]}
        resources[f"r{i}"] = {"type": "OS::Heat::TestResource", "properties": props}
    return {"heat_template_version": "2018-08-31", "resources": resources}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stacks", type=int, default=5)
    parser.add_argument("--resources", type=int, default=40)
    parser.add_argument("--poll-only", action="store_true")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="api-stream-"))
    rt = open_runtime(Settings(database_url=f"sqlite:///{folder / 'bench.db'}"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(create_app(rt), log_level="warning",
                                           timeout_graceful_shutdown=2))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)

    received: dict[int, float] = {}
    done = threading.Event()
    connected = threading.Event()
    finished: set[str] = set()

    def watch() -> None:
        with httpx.Client(base_url=base, timeout=60) as c, \
                c.stream("GET", "/v1/bench/events?watch=true") as r:
            connected.set()
            event_id = None
            for line in r.iter_lines():
                now = time.time()
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("data: ") and event_id is not None:
                    received[event_id] = now
                    data = json.loads(line[6:])
                    if data["resource_status"] == "CREATE_COMPLETE" and \
                            data["physical_resource_id"] == data["links"][2]["href"] \
                            .rsplit("/", 1)[1]:
                        finished.add(data["physical_resource_id"])
                        if len(finished) == args.stacks:
                            done.set()
                            return

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    connected.wait(10)
    time.sleep(0.2)
    if args.poll_only:
        rt.engine.observers.clear()
    started = time.monotonic()
    with httpx.Client(base_url=base, timeout=60) as c:
        for i in range(args.stacks):
            r = c.post("/v1/bench/stacks",
                       json={"stack_name": f"s{i}", "template": template(args.resources)})
            r.raise_for_status()
    if not done.wait(300):
        raise SystemExit("the stacks did not all complete")
    elapsed = time.monotonic() - started
    with rt.store.read() as tx:
        created = {e.id: e.created_at for e in tx.project_events("bench")}
    latencies = sorted((received[i] - created[i]) * 1000 for i in created if i in received)
    server.should_exit = True
    print(f"mode: {'poll only (other processes)' if args.poll_only else 'notified'}; "
          f"{args.stacks} stacks x {args.resources} resources in {elapsed:.2f} s; "
          f"heartbeat {stream.HEARTBEAT_SECONDS:.0f} s, check {stream.POLL_SECONDS * 1000:.0f} ms")
    print(f"events received: {len(latencies)} of {len(created)}")
    print(f"commit -> SSE client latency (ms): median {statistics.median(latencies):.1f}, "
          f"p90 {latencies[int(len(latencies) * 0.9)]:.1f}, max {latencies[-1]:.1f}")


if __name__ == "__main__":
    main()
