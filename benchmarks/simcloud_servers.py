"""How fast the simulated cloud answers: servers created and polled to ACTIVE by many clients.

    python benchmarks/simcloud_servers.py [--servers 1000] [--clients 20] [--build-seconds 1]

Starts ``convergence simcloud`` as a real process on a loopback port, makes one network and
subnet, then runs ``--clients`` client processes, each with its own unmodified openstacksdk
connection (its own token and HTTP connection pool; processes, so that 20 clients are not one
interpreter's lock). Each creates its share of ``--servers`` servers (``create_server`` on
the network), then polls each with ``get_server`` until it is ACTIVE, listing its own servers
(``servers(details=True, name=...)``: Nova filters the whole fleet by name) once every round
of polls, as a controller watching its servers would. Then the whole fleet is listed
(``servers(details=True)``, 1,000 a page) five times. It prints, for create, show, list and
list-all, the number of requests, their latency as the clients saw it and as the cloud spent
it (the journal's ``seconds``), median and p99 in milliseconds, and the requests per second of
the run; and the cloud's CPU seconds (``/proc``). On a 2-core machine the clients and the
cloud share the cores: openstacksdk spends about 5 ms of CPU building each server object it
lists, so the clients' figures include that wait, and the cloud's own are the ones to read.
The figures are not asserted anywhere; the target is that the cloud never limits the engine's
benchmarks (it answers faster than the engine asks).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openstack

from convergence_simcloud.client import SimControl


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


def timed(seconds: dict[str, list[float]], what: str, call, *args, **kwargs):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    result = call(*args, **kwargs)
    seconds.setdefault(what, []).append(time.perf_counter() - started)
    return result


def client(url: str, prefix: str, names: list[str], network_id: str, flavor_id: str,
           image_id: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """One client process: its servers created, then polled to ACTIVE; its timings sent back."""
    seconds: dict[str, list[float]] = {}
    try:
        conn = connect(url)
        ids = [timed(seconds, "create", conn.compute.create_server, name=name,
                     flavor_id=flavor_id, image_id=image_id,
                     networks=[{"uuid": network_id}]).id
               for name in names]
        pending = set(ids)
        while pending:
            timed(seconds, "list", lambda: list(conn.compute.servers(
                details=True, name=f"^{prefix}")))
            for server_id in sorted(pending):
                server = timed(seconds, "show", conn.compute.get_server, server_id)
                if server.status == "ACTIVE":
                    pending.discard(server_id)
                elif server.status == "ERROR":
                    raise RuntimeError(f"server {server_id} went to ERROR")
            if pending:
                time.sleep(0.2)
        results.put((seconds, None))
    except Exception as exc:
        results.put((seconds, f"{type(exc).__name__}: {exc}"))


def percentiles(values: list[float]) -> tuple[float, float]:
    """Median and p99 of ``values`` (seconds), in milliseconds."""
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


def kind_of(method: str, path: str, query: str) -> str | None:
    """Which figure a journaled request counts in."""
    if method == "POST" and path.endswith("/servers"):
        return "create"
    if method == "GET" and path.endswith("/servers/detail"):
        return "list" if "name=" in query else "list-all"
    if method == "GET" and "/servers/" in path:
        return "show"
    return None


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
            results: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
            processes = []
            for c in range(args.clients):
                prefix = f"bench-{c}-"
                names = [f"{prefix}{i}" for i in range(c, args.servers, args.clients)]
                processes.append(multiprocessing.Process(target=client, args=(
                    url, prefix, names, network.id, flavor.id, image.id, results)))
            started = time.perf_counter()
            for process in processes:
                process.start()
            seconds: dict[str, list[float]] = {}
            errors = []
            for _ in processes:
                found, error = results.get()
                for what, values in found.items():
                    seconds.setdefault(what, []).extend(values)
                if error:
                    errors.append(error)
            for process in processes:
                process.join()
            wall = time.perf_counter() - started
            for _ in range(5):
                timed(seconds, "list-all", lambda: list(conn.compute.servers(details=True,
                                                                             limit=1000)))
            cpu = cpu_seconds(server.pid) - cpu_before
            entries = control.journal(mark)
        finally:
            server.terminate()
            server.wait(10)
    if errors:
        raise SystemExit("errors:\n" + "\n".join(errors[:10]))
    spent: dict[str, list[float]] = {}
    for entry in entries:
        what = kind_of(entry.method, entry.path, entry.query)
        if what is not None:
            spent.setdefault(what, []).append(entry.seconds)
    print(f"{args.servers} servers, {args.clients} client processes, build "
          f"{args.build_seconds} s: all ACTIVE after {wall:.1f} s; {len(entries)} requests "
          f"({len(entries) / wall:.0f}/s), cloud CPU {cpu:.1f} s "
          f"({cpu / max(len(entries), 1) * 1000:.2f} ms/request)")
    print(f"  {'':8} {'requests':>8} {'per s':>6}   client median / p99 ms   "
          f"cloud median / p99 ms")
    for what in ("create", "show", "list", "list-all"):
        client_ms, cloud_ms = percentiles(seconds[what]), percentiles(spent[what])
        rate = f"{len(seconds[what]) / wall:6.0f}" if what != "list-all" else "     -"
        print(f"  {what:8} {len(seconds[what]):8} {rate}   {client_ms[0]:9.1f} / "
              f"{client_ms[1]:7.1f}      {cloud_ms[0]:9.1f} / {cloud_ms[1]:7.1f}")


if __name__ == "__main__":
    main()
