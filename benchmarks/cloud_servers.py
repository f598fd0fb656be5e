"""The engine driving a cloud at scale: many servers with ports building at once.

    python benchmarks/cloud_servers.py [--servers 1000] [--build-seconds 20] [--workers 2]
                                       [--storm]

Starts ``convergence simcloud`` as a process (its instance quota raised by a seed), a
PostgreSQL database and a Redis db (``benchmarks/distributed.py``) and ``--workers`` worker
processes that reach the cloud through ``OS_CLOUD``, as a user's would. This process creates
one stack: a network, a /16 subnet, and ``--servers`` ports each with a server on it (every
server builds for ``--build-seconds``), waits for it, then deletes it. ``--storm`` adds a 429
storm: the first thousand compute calls are refused with ``Retry-After: 2``.

Printed: when the last server became ACTIVE (its create's answer in the cloud's journal, plus
the build time) and when the stack completed, and the gap between them; the workers' CPU
seconds and utilisation (CPU / wall x workers); messages, statements and transactions per
server (the workers' own figures); the cloud's calls per server, by kind (its journal); the
delete's wall time and whether anything was left in the cloud. Figures only: nothing here is
asserted, and the tests never run it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distributed import encryption_keys, free_port, start_cluster


def template(servers: int, build_flavor: str) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "net": {"type": "OS::Neutron::Net", "properties": {"name": "bench-net"}},
        "subnet": {"type": "OS::Neutron::Subnet",
                   "properties": {"network": {"get_resource": "net"},
                                  "cidr": "10.0.0.0/16"}},
    }
    for i in range(servers):
        resources[f"port{i}"] = {"type": "OS::Neutron::Port", "depends_on": ["subnet"],
                                 "properties": {"network": {"get_resource": "net"}}}
        resources[f"server{i}"] = {
            "type": "OS::Nova::Server",
            "properties": {"name": f"bench-{i}", "flavor": build_flavor, "image": "cirros",
                           "networks": [{"port": {"get_resource": f"port{i}"}}]}}
    return {"heat_template_version": "2018-08-31", "resources": resources}


def group_cpu(pid: int) -> float:
    """CPU seconds of every live process in ``pid``'s process group."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pid:  # pgrp
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def start_simcloud(folder: str, port: int, options: list[str]
                   ) -> tuple[subprocess.Popen[bytes], Any, dict[str, str]]:
    """``convergence simcloud`` as a process on ``port`` with ``options``, once it answers:
    the process, its control client, and the environment that points openstacksdk at it
    (a ``clouds.yaml`` in ``folder``)."""
    from convergence_simcloud.client import SimControl
    from convergence_simcloud.serve import clouds_yaml

    url = f"http://127.0.0.1:{port}"
    cloud = subprocess.Popen(
        [sys.executable, "-m", "convergence", "simcloud", "--port", str(port), *options],
        stdout=subprocess.DEVNULL, stderr=(Path(folder) / "simcloud.log").open("wb"))
    control = SimControl(url)
    deadline = time.monotonic() + 30
    while True:
        try:
            control.last()
            break
        except Exception:
            if time.monotonic() > deadline:
                cloud.terminate()
                raise SystemExit("the simulated cloud did not start") from None
            time.sleep(0.2)
    clouds = Path(folder) / "clouds.yaml"
    clouds.write_text(clouds_yaml(url))
    return cloud, control, {"OS_CLOUD": "simcloud", "OS_CLIENT_CONFIG_FILE": str(clouds),
                            "CONVERGENCE_POLL_SECONDS": "1.0"}


def kind_of(method: str, path: str) -> str:
    service = path.strip("/").split("/")[0]
    noun = [p for p in path.split("/") if p and not any(c.isdigit() for c in p[:8])][-1:]
    return f"{service} {method} {noun[0] if noun else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--build-seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--storm", action="store_true")
    args = parser.parse_args()

    from convergence.runtime import open_runtime
    from convergence.services import queries, running, stacks
    from convergence.settings import Settings
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        seed = Path(folder) / "seed.yaml"
        n = args.servers
        seed.write_text(f"compute_quota: {{instances: {n * 2}, cores: {n * 2}, "
                        f"ram: {n * 2048}}}\nnetwork_quota: {{port: {n * 3}}}\n")
        cloud, control, env = start_simcloud(
            folder, port, ["--build-seconds", str(args.build_seconds), "--seed", str(seed)])
        clouds = Path(env["OS_CLIENT_CONFIG_FILE"])
        workers = None
        try:
            url, broker, workers = start_cluster(folder, args.workers, env, args.concurrency)
            settings = Settings(database_url=url, broker_url=broker,
                                max_template_bytes=1 << 30, max_request_bytes=1 << 30,
                                encryption_keys=encryption_keys())
            rt = open_runtime(settings, environ=env)
            if args.storm:
                control.add_rule("rate_limited", service="compute", seconds=2, count=1000)
            mark = control.last()
            figures_before = workers.figures()
            cpu_before = sum(group_cpu(p.pid) for p in workers.processes)
            started = time.time()
            stack = stacks.create_stack(rt, "bench", "servers", _json(template(n, "m1.tiny")))
            stack = running.wait_for_stack(rt, "bench", stack.id, refresh=0.2)
            completed = time.time()
            cpu = sum(group_cpu(p.pid) for p in workers.processes) - cpu_before
            time.sleep(1.2)  # the workers write their figures twice a second
            figures = {k: v - figures_before[k] for k, v in workers.figures().items()}
            journal = control.journal(mark)
            # When each server became ACTIVE (Nova's launched_at) and when its resource was
            # recorded CREATE_COMPLETE: how late the engine noticed.
            active = _launched(clouds)
            done = {e.physical_resource_id: e.created_at
                    for e in queries.list_events(rt, "bench", stack.id)
                    if e.resource_type == "OS::Nova::Server" and e.action == "CREATE"
                    and e.status == "COMPLETE"}
            lags = sorted(done[s] - t for s, t in active.items() if s in done)
            last_active = max(active.values()) if active else 0.0
            wall = completed - started
            print(f"{n} servers with ports, build {args.build_seconds:g} s, {args.workers} "
                  f"workers x {args.concurrency}{', 429 storm' if args.storm else ''}: "
                  f"{stack.stack_status} in {wall:.1f} s")
            print(f"  last server ACTIVE at {last_active - started:.1f} s, stack complete at "
                  f"{wall:.1f} s: {completed - last_active:.1f} s after")
            if lags:
                print(f"  a server's ACTIVE to its CREATE_COMPLETE: median "
                      f"{statistics.median(lags):.2f} s, max {lags[-1]:.2f} s")
            print(f"  workers: {cpu:.1f} s CPU, utilisation {cpu / (wall * args.workers):.0%}")
            print(f"  per server: {figures['sent'] / n:.2f} messages sent, "
                  f"{figures['executed'] / n:.2f} executed, "
                  f"{figures['statements'] / n:.1f} statements, "
                  f"{figures['transactions'] / n:.2f} transactions")
            print(f"  cloud calls: {len(journal)} ({len(journal) / n:.2f} per server); "
                  f"refused 429: {sum(e.status == 429 for e in journal)}")
            for kind, count in Counter(kind_of(e.method, e.path)
                                       for e in journal).most_common(8):
                print(f"    {kind:40} {count:7} {count / n:6.2f}/server")
            started = time.time()
            stack = stacks.delete_stack(rt, "bench", "servers")
            stack = running.wait_for_stack(rt, "bench", stack.id, refresh=0.2)
            left = {k: v for k, v in control.objects().items()
                    if k in ("server", "port") and v}
            print(f"  delete: {stack.stack_status} in {time.time() - started:.1f} s; left in "
                  f"the cloud: {left or 'nothing'}")
            rt.store.engine.dispose()
        finally:
            if workers is not None:
                workers.stop()
            cloud.terminate()
            cloud.wait(10)


def _launched(clouds: Path) -> dict[str, float]:
    """Each server's ``OS-SRV-USG:launched_at`` (when it became ACTIVE), by id."""
    import datetime

    import openstack
    from openstack.config import loader

    region = loader.OpenStackConfig(config_files=[str(clouds)], load_envvars=False) \
        .get_one(cloud="simcloud")
    conn = openstack.connection.Connection(config=region)
    found = {}
    for server in conn.compute.servers(details=True, limit=1000):
        if server.launched_at:
            moment = datetime.datetime.fromisoformat(str(server.launched_at))
            found[str(server.id)] = moment.replace(tzinfo=datetime.UTC).timestamp()
    conn.close()
    return found


def _json(doc: dict[str, Any]) -> str:
    import json

    return json.dumps(doc)


if __name__ == "__main__":
    main()
