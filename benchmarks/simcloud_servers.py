"""How fast the simulated cloud answers: servers created and polled to ACTIVE by many clients.

    python benchmarks/simcloud_servers.py [--servers 1000] [--clients 20] [--build-seconds 1]

Starts ``convergence simcloud`` as a real process on a loopback port, makes one network and
subnet, then runs ``--clients`` threads, each with its own unmodified openstacksdk connection
(its own token and HTTP connection pool). Each thread creates its share of ``--servers``
servers (``create_server`` on the network), then polls each with ``get_server`` until it is
ACTIVE, listing the servers (``servers(details=True)``, 1,000 to a page) once every round of
polls, as a controller watching its fleet would. It prints, for create, show and list, the
number of requests, their latency (median and p99, milliseconds) and the requests per second
of the whole run; the cloud's CPU seconds (``/proc``) and the journal's count of requests.
The figures are not asserted anywhere; the target is that the cloud never limits the engine's
benchmarks (it answers faster than the engine asks).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import openstack

from convergence.simcloud.client import SimControl


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connect(url: str) -> openstack.connection.Connection:
    return openstack.connect(
        auth_url=f"{url}/v3", username="admin", password="admin", project_name="admin",
        user_domain_name="Default", project_domain_name="Default", region_name="RegionOne",
        identity_api_version="3")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Timings:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, list[float]] = defaultdict(list)

    def timed(self, what: str, call, *args, **kwargs):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        result = call(*args, **kwargs)
        spent = time.perf_counter() - started
        with self.lock:
            self.seconds[what].append(spent)
        return result


def client(url: str, names: list[str], network_id: str, flavor_id: str, image_id: str,
           timings: Timings, errors: list[str]) -> None:
    try:
        conn = connect(url)
        ids = [timings.timed("create", conn.compute.create_server, name=name,
                             flavor_id=flavor_id, image_id=image_id,
                             networks=[{"uuid": network_id}]).id
               for name in names]
        pending = set(ids)
        while pending:
            timings.timed("list", lambda: list(conn.compute.servers(details=True,
                                                                    limit=1000)))
            for server_id in sorted(pending):
                server = timings.timed("show", conn.compute.get_server, server_id)
                if server.status == "ACTIVE":
                    pending.discard(server_id)
                elif server.status == "ERROR":
                    raise RuntimeError(f"server {server_id} went to ERROR")
            if pending:
                time.sleep(0.2)
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--build-seconds", type=float, default=1.0)
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        log = (Path(folder) / "simcloud.log").open("wb")
        # Quotas high enough for the run: a seed file with the instance and core counts.
        seed = Path(folder) / "seed.yaml"
        seed.write_text(f"compute_quota: {{instances: {args.servers * 2}, "
                        f"cores: {args.servers * 2}, ram: {args.servers * 1024}}}\n")
        server = subprocess.Popen(
            [sys.executable, "-m", "convergence", "simcloud", "--port", str(port),
             "--build-seconds", str(args.build_seconds), "--seed", str(seed)],
            stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    conn = connect(url)
                    flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
                    break
                except Exception:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("simcloud did not start") from None
                    time.sleep(0.2)
            image = conn.image.find_image("cirros", ignore_missing=False)
            network = conn.network.create_network(name="bench")
            conn.network.create_subnet(network_id=network.id, ip_version=4,
                                       cidr="10.0.0.0/16")
            control = SimControl(url)
            mark = control.last()
            cpu_before = cpu_seconds(server.pid)
            timings, errors = Timings(), []
            share = [[f"bench-{c}-{i}" for i in range(c, args.servers, args.clients)]
                     for c in range(args.clients)]
            threads = [threading.Thread(target=client, args=(
                url, names, network.id, flavor.id, image.id, timings, errors))
                for names in share]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - started
            cpu = cpu_seconds(server.pid) - cpu_before
            requests = len(control.journal(mark))
        finally:
            server.terminate()
            server.wait(10)
    if errors:
        raise SystemExit("errors:\n" + "\n".join(errors[:10]))
    print(f"{args.servers} servers, {args.clients} clients, build {args.build_seconds} s: "
          f"{wall:.1f} s wall, {requests} requests ({requests / wall:.0f}/s), "
          f"cloud CPU {cpu:.1f} s ({cpu / max(requests, 1) * 1000:.2f} ms/request)")
    for what in ("create", "show", "list"):
        seconds = sorted(timings.seconds[what])
        p99 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))]
        median = statistics.median(seconds) * 1000
        print(f"  {what:6} {len(seconds):6} requests  median {median:7.1f} ms  "
              f"p99 {p99 * 1000:7.1f} ms  {len(seconds) / wall:7.0f}/s")


if __name__ == "__main__":
    main()
