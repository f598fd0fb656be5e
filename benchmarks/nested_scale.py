"""A Magnum-sized cluster: one node group of nested stacks against the simulated cloud.

    python benchmarks/nested_scale.py [--nodes 1000] [--workers 2] [--concurrency 1]
                                      [--grow 10] [--roll-nodes 100] [--roll-batch 10]

Starts ``convergence simcloud`` as a process (builds instant, its quotas raised by a seed), a
PostgreSQL database and a Redis db (``benchmarks/distributed.py``), ``--workers`` worker
processes and an API process. Then, as a user would:

1. creates a cluster: a network, a subnet, a router and a ``OS::Heat::ResourceGroup`` of
   ``--nodes`` members, each a nested stack of 20 resources (a port, a server, a volume and
   its attachment, and 16 configuration values reading the server's address), and an output
   with every node's address; waits for it;
2. reads that output through the API (``GET .../outputs/addresses``, and the stack with its
   outputs) 20 times each: the median and the slowest;
3. grows the group by ``--grow`` members (a PATCH of its count) and counts the nodes the
   update planned in every stack it touched (every planned node is a step executed);
4. a second stack of ``--roll-nodes`` members rolls a new definition through them in batches
   of ``--roll-batch`` (``rolling_update``): its batches (the group's nested stack's update
   traversals), the idle gap between one batch's end and the next one's start, and the most
   members a batch changed;
5. deletes both and says what is left in the cloud.

Printed: the wall times, the workers' CPU seconds, the figures above. Nothing is asserted, and
the tests never run it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cloud_servers import group_cpu, start_simcloud
from distributed import encryption_keys, free_port, start_cluster

TENANT = "bench"
VALUES = 16  # configuration stand-ins per node: 4 cloud resources + 16 = 20


def node_template() -> str:
    resources: dict[str, Any] = {
        "port": {"type": "OS::Neutron::Port",
                 "properties": {"network": {"get_param": "network"},
                                "fixed_ips": [{"subnet": {"get_param": "subnet"}}]}},
        "server": {"type": "OS::Nova::Server",
                   "properties": {"flavor": "m1.tiny", "image": "cirros",
                                  "networks": [{"port": {"get_resource": "port"}}],
                                  "metadata": {"index": {"get_param": "index"},
                                               "config": {"get_param": "config"}}}},
        "volume": {"type": "OS::Cinder::Volume", "properties": {"size": 1}},
        "attachment": {"type": "OS::Cinder::VolumeAttachment",
                       "properties": {"instance_uuid": {"get_resource": "server"},
                                      "volume_id": {"get_resource": "volume"}}},
    }
    for i in range(VALUES):
        resources[f"config{i}"] = {
            "type": "OS::Heat::Value",
            "properties": {"value": {"str_replace": {
                "template": f"node $index setting {i} at $address",
                "params": {"$index": {"get_param": "index"},
                           "$address": {"get_attr": ["server", "first_address"]}}}}}}
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "parameters": {"network": {"type": "string"}, "subnet": {"type": "string"},
                       "index": {"type": "string"},
                       "config": {"type": "string", "default": "v1"}},
        "resources": resources,
        "outputs": {"address": {"value": {"get_attr": ["port", "fixed_ips", 0,
                                                       "ip_address"]}}}})


def cluster_template(cidr: str, policy: dict[str, Any] | None = None) -> str:
    group: dict[str, Any] = {
        "type": "OS::Heat::ResourceGroup",
        "properties": {"count": {"get_param": "count"}, "resource_def": {
            "type": "node.yaml",
            "properties": {"network": {"get_resource": "net"},
                           "subnet": {"get_resource": "subnet"}, "index": "%index%",
                           "config": {"get_param": "config"}}}}}
    if policy:
        group["update_policy"] = policy
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "parameters": {"count": {"type": "number"},
                       "config": {"type": "string", "default": "v1"}},
        "resources": {
            "net": {"type": "OS::Neutron::Net", "properties": {"name": "cluster"}},
            "subnet": {"type": "OS::Neutron::Subnet",
                       "properties": {"network": {"get_resource": "net"}, "cidr": cidr}},
            "router": {"type": "OS::Neutron::Router",
                       "properties": {"external_gateway_info": {"network": "public"}}},
            "router_interface": {"type": "OS::Neutron::RouterInterface",
                                 "properties": {"router": {"get_resource": "router"},
                                                "subnet": {"get_resource": "subnet"}}},
            "nodes": group,
        },
        "outputs": {"addresses": {"value": {"get_attr": ["nodes", "address"]}}}})


def planned_since(url: str, since: float) -> dict[str, int]:
    """Converge nodes planned by the traversals begun since ``since``, by kind of stack."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text(
            "SELECT s.nested_depth, t.action, count(n.seq) FROM traversals t "
            "JOIN stacks s ON s.id = t.stack_id "
            "LEFT JOIN nodes n ON n.traversal_id = t.id AND n.phase = 'converge' "
            "WHERE t.created_at >= :since GROUP BY s.nested_depth, t.action, t.id"),
            {"since": since}).all()
    engine.dispose()
    found: dict[str, int] = defaultdict(int)
    stacks: dict[str, int] = defaultdict(int)
    for depth, action, count in rows:
        key = {0: "the cluster", 1: "the group's nested stack"}.get(depth, "new members")
        found[f"{key} ({action})"] += count
        stacks[f"{key} ({action})"] += 1
    return {f"{k}: {stacks[k]} traversal(s)": v for k, v in found.items()}


def timed_gets(client: Any, path: str, times: int = 20) -> tuple[float, float, int]:
    seconds = []
    size = 0
    for _ in range(times):
        started = time.perf_counter()
        answer = client.get(path)
        seconds.append(time.perf_counter() - started)
        answer.raise_for_status()
        size = len(answer.content)
    return statistics.median(seconds) * 1000, max(seconds) * 1000, size


def stages_of(url: str, group_id: str, since: float) -> tuple[int, float, int]:
    """The rolling update's stages, from the traversals of the group's nested stack begun
    since ``since`` (one per batch): how many, the longest idle gap between one stage's end
    and the next one's start, and the most members any stage changed (the member stacks'
    update traversals begun during it)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        stages = conn.execute(sqlalchemy.text(
            "SELECT created_at, finished_at FROM traversals WHERE stack_id = :g AND "
            "created_at >= :since AND action = 'UPDATE' ORDER BY created_at"),
            {"g": group_id, "since": since}).all()
        members = [r[0] for r in conn.execute(sqlalchemy.text(
            "SELECT t.created_at FROM traversals t JOIN stacks s ON s.id = t.stack_id "
            "WHERE s.parent_id = :g AND t.created_at >= :since AND t.action = 'UPDATE'"),
            {"g": group_id, "since": since})]
    engine.dispose()
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(stages) if a[1]]
    most = max((sum(start <= m <= (end or start) for m in members) for start, end in stages),
               default=0)
    return len(stages), max(gaps, default=0.0), most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--grow", type=int, default=10)
    parser.add_argument("--roll-nodes", type=int, default=100)
    parser.add_argument("--roll-batch", type=int, default=10)
    args = parser.parse_args()

    import httpx

    from convergence.runtime import open_runtime
    from convergence.services import running, stacks
    from convergence.settings import Settings

    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        n = args.nodes + args.grow + args.roll_nodes
        seed = Path(folder) / "seed.yaml"
        seed.write_text(f"compute_quota: {{instances: {n * 2}, cores: {n * 2}, "
                        f"ram: {n * 2048}}}\nnetwork_quota: {{port: {n * 3}}}\n"
                        f"volume_quota: {{volumes: {n * 2}, gigabytes: {n * 4}}}\n")
        cloud, control, env = start_simcloud(
            folder, port, ["--build-seconds", "0", "--volume-seconds", "create=0",
                           "--volume-seconds", "attach=0", "--volume-seconds", "detach=0",
                           "--volume-seconds", "delete=0", "--seed", str(seed)])
        workers = api = None
        try:
            url, broker, workers = start_cluster(folder, args.workers, env, args.concurrency)
            api_port = free_port()
            api = subprocess.Popen(
                [sys.executable, "-m", "convergence", "api", "--port", str(api_port)],
                env={**__import__("os").environ, **env, "CONVERGENCE_DATABASE_URL": url,
                     "CONVERGENCE_BROKER_URL": broker},
                stdout=subprocess.DEVNULL, stderr=(Path(folder) / "api.log").open("wb"))
            settings = Settings(database_url=url, broker_url=broker,
                                max_template_bytes=1 << 30, max_request_bytes=1 << 30,
                                encryption_keys=encryption_keys())
            rt = open_runtime(settings, environ=env)
            files = {"node.yaml": node_template()}

            # 1. create
            cpu0 = sum(group_cpu(p.pid) for p in workers.processes)
            started = time.time()
            stack = stacks.create_stack(rt, TENANT, "cluster", cluster_template("10.0.0.0/16"),
                                        files=files, parameters={"count": args.nodes})
            stack = running.wait_for_stack(rt, TENANT, stack.id, refresh=0.5)
            wall = time.time() - started
            cpu = sum(group_cpu(p.pid) for p in workers.processes) - cpu0
            addresses = stack.outputs.get("addresses", {}).get("value") or []
            if stack.status != "COMPLETE" or stack.action != "CREATE":
                from convergence.services import queries

                failed = [e.reason for e in queries.list_events(rt, TENANT, stack.id)
                          if e.status == "FAILED"]
                raise SystemExit(f"the cluster is {stack.stack_status}: "
                                 f"{failed[:1] or stack.status_reason}")
            print(f"{args.nodes} nodes as nested stacks of 20 resources "
                  f"({args.nodes * 20 + 5} resources), {args.workers} workers x "
                  f"{args.concurrency}: {stack.stack_status} in {wall:.1f} s; workers "
                  f"{cpu:.1f} s CPU ({cpu / (wall * args.workers):.0%}); "
                  f"{len(addresses)} addresses in the output")

            # 2. the outputs, through the API
            base = f"http://127.0.0.1:{api_port}/v1/{TENANT}/stacks/cluster/{stack.id}"
            with httpx.Client(timeout=30) as client:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        client.get(f"http://127.0.0.1:{api_port}/")
                        break
                    except httpx.HTTPError:
                        if time.monotonic() > deadline:
                            raise SystemExit("the API did not start") from None
                        time.sleep(0.2)
                for what, path in (("output show addresses", f"{base}/outputs/addresses"),
                                   ("stack show with outputs", base)):
                    median, worst, size = timed_gets(client, path)
                    print(f"  {what}: median {median:.1f} ms, slowest {worst:.1f} ms "
                          f"({size / 1024:.0f} KiB)")

            # 3. grow by a few
            mark = time.time()
            cpu0 = sum(group_cpu(p.pid) for p in workers.processes)
            stack = stacks.update_stack(rt, TENANT, "cluster", existing=True,
                                        parameters={"count": args.nodes + args.grow})
            stack = running.wait_for_stack(rt, TENANT, stack.id, refresh=0.2)
            cpu = sum(group_cpu(p.pid) for p in workers.processes) - cpu0
            print(f"  grow by {args.grow}: {stack.stack_status} in {time.time() - mark:.1f} "
                  f"s, workers {cpu:.1f} s CPU; converge nodes planned (steps):")
            for what, count in sorted(planned_since(url, mark).items()):
                print(f"    {what:58} {count:6}")

            # 4. a rolling update in batches
            roll = stacks.create_stack(
                rt, TENANT, "rolled", cluster_template(
                    "10.1.0.0/16",
                    {"rolling_update": {"max_batch_size": args.roll_batch}}),
                files=files, parameters={"count": args.roll_nodes})
            roll = running.wait_for_stack(rt, TENANT, roll.id, refresh=0.2)
            mark = time.time()
            roll = stacks.update_stack(rt, TENANT, "rolled", existing=True,
                                       parameters={"config": "v2"})
            roll = running.wait_for_stack(rt, TENANT, roll.id, refresh=0.2)
            with rt.store.read() as tx:
                (group,) = tx.child_stacks(roll.id)
            count, gap, most = stages_of(url, group.id, mark)
            print(f"  rolling update of {args.roll_nodes} nodes by {args.roll_batch}: "
                  f"{roll.stack_status} in {time.time() - mark:.1f} s; {count} batches, "
                  f"at most {most} members changed in a batch, longest idle gap between "
                  f"batches {gap:.3f} s")

            # 5. delete
            mark = time.time()
            for name in ("cluster", "rolled"):
                stacks.delete_stack(rt, TENANT, name)
            for name, sid in (("cluster", stack.id), ("rolled", roll.id)):
                done = running.wait_for_stack(rt, TENANT, sid, refresh=0.5)
                print(f"  delete {name}: {done.stack_status}")
            left = {k: v for k, v in control.objects().items()
                    if k in ("server", "port", "volume") and v}
            print(f"  deletes in {time.time() - mark:.1f} s; left in the cloud: "
                  f"{left or 'nothing'}")
            rt.store.engine.dispose()
        finally:
            if api is not None:
                api.terminate()
                api.wait(10)
            if workers is not None:
                workers.stop()
            cloud.terminate()
            cloud.wait(10)


if __name__ == "__main__":
    main()
