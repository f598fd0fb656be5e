"""Stack shows through the API: latency with 1,000 outputs, and shows per second.

    python benchmarks/api_show.py [--resources 1000] [--requests 500] [--clients 8]

Starts ``convergence api`` as a real process on a loopback port with a SQLite file of its own,
creates a stack of N resources with N outputs (each output a resource attribute), waits for it,
then times ``GET /v1/{tenant}/stacks/{name}/{id}`` sequentially (median and p95 latency) and
from several client threads at once (shows per second). Outputs are materialised when the
stack converges, so a show is one or two queries whatever the stack's size.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

TENANT = "bench"


def template(n: int) -> dict[str, object]:
    resources = {f"r{i}": {"type": "OS::Heat::TestResource", "properties": {"value": f"ip-{i}"}}
                 for i in range(n)}
    outputs = {f"o{i}": {"value": {"get_attr": [f"r{i}", "output"]}} for i in range(n)}
    return {"heat_template_version": "2018-08-31", "resources": resources, "outputs": outputs}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        env = {**os.environ, "CONVERGENCE_DATABASE_URL": f"sqlite:///{folder}/api.db"}
        env.pop("CONVERGENCE_BROKER_URL", None)
        log = Path(folder, "api.log").open("wb")  # noqa: SIM115 - lives with the server
        server = subprocess.Popen([sys.executable, "-m", "convergence", "api", "--port",
                                   str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            run(base, args)
        finally:
            server.terminate()
            server.wait(30)


def run(base: str, args: argparse.Namespace) -> None:
    client = httpx.Client(base_url=base, timeout=60)
    deadline = time.monotonic() + 30
    while True:
        try:
            if client.get("/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    created = client.post(f"/v1/{TENANT}/stacks", json={
        "stack_name": "big", "template": template(args.resources)})
    created.raise_for_status()
    stack_id = created.json()["stack"]["id"]
    path = f"/v1/{TENANT}/stacks/big/{stack_id}"
    while client.get(path).json()["stack"]["stack_status"] != "CREATE_COMPLETE":
        time.sleep(0.2)
    body = client.get(path).json()["stack"]
    assert len(body["outputs"]) == args.resources, "every output materialised"

    latencies = []
    for _ in range(args.requests):
        start = time.perf_counter()
        response = client.get(path)
        latencies.append(time.perf_counter() - start)
        response.raise_for_status()
    latencies.sort()
    print(f"stack of {args.resources} resources and {args.resources} outputs "
          f"({len(json.dumps(body)) / 1024:.0f} KiB per show)")
    print(f"show latency: median {statistics.median(latencies) * 1000:.1f} ms, "
          f"p95 {latencies[int(len(latencies) * 0.95)] * 1000:.1f} ms")

    small = client.post(f"/v1/{TENANT}/stacks", json={
        "stack_name": "small", "template": template(10)}).json()["stack"]["id"]
    small_path = f"/v1/{TENANT}/stacks/small/{small}"
    while client.get(small_path).json()["stack"]["stack_status"] != "CREATE_COMPLETE":
        time.sleep(0.2)
    for label, target in (("10-output stack", small_path), ("1,000-output stack", path)):
        count = [0]
        stop = time.monotonic() + 5

        threads = [threading.Thread(target=shows, args=(base, target, stop, count))
                   for _ in range(args.clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"shows per second ({label}, {args.clients} clients): "
              f"{count[0] / (time.perf_counter() - start):.0f}")


def shows(base: str, url: str, stop: float, count: list[int]) -> None:
    with httpx.Client(base_url=base, timeout=60) as c:
        while time.monotonic() < stop:
            c.get(url).raise_for_status()
            count[0] += 1


if __name__ == "__main__":
    main()
