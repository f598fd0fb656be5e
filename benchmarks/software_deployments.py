"""Software deployments end to end: servers whose agents run chained script configs, and hooks.

    python benchmarks/software_deployments.py [--servers 200] [--chain 5] [--workers 2]
                                              [--concurrency 4] [--poll 1.0] [--hooks 50]
                                              [--redis-db 8]

Starts ``convergence simcloud`` as a process (builds instant, its quotas raised by a seed, its
software-configuration agent polling every ``--poll`` seconds and executing the script configs,
``--execute-scripts``, which it does not by default), a PostgreSQL database of its
own and a Redis db (``benchmarks/distributed.py``; the index is ``--redis-db``, not one the
integration tests claim), ``--workers`` worker processes and an API process, both told the
API's address as ``CONVERGENCE_PUBLIC_URL`` (the servers' agents poll and signal its signed
URLs). Then, through the API, as a user would:

1. creates a stack: a network, a subnet and a ``OS::Heat::ResourceGroup`` of ``--servers``
   members, each a nested stack of a ``SOFTWARE_CONFIG`` server and ``--chain`` script
   deployments, each reading the output of the one before (``10_d1``, ``20_d2``...); waits
   for it (the API polled once a second), then reads the agent's run log in the simulated
   cloud: how many runs, whether each server's came in chain order, how long after the last
   report the stack completed; and the workers' CPU over the create, and per wall second in
   the window where every server is ACTIVE and only the agents are working;
2. creates a second stack of ``--hooks`` test resources, each with a ``pre-create`` hook;
   once all are paused, counts the leases held and the parked nodes (the database, read only)
   and the workers' CPU over 10 s; clears every hook and times the rest;
3. deletes both and says what is left in the cloud.

Printed: the figures above. Nothing is asserted, and the tests never run it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import distributed
from cloud_servers import group_cpu, start_simcloud
from distributed import free_port, start_cluster

TENANT = "bench"
PAUSED = "paused until Hook"
SCRIPT = """#!/bin/sh
printf '%s+%s' "$upstream" "$deploy_resource_name" > "${heat_outputs_path}.result"
"""


def member_template(chain: int) -> str:
    resources: dict[str, Any] = {
        "config": {"type": "OS::Heat::SoftwareConfig",
                   "properties": {"group": "script", "config": SCRIPT,
                                  "inputs": [{"name": "upstream"}],
                                  "outputs": [{"name": "result"}]}},
        "server": {"type": "OS::Nova::Server",
                   "properties": {"image": "cirros", "flavor": "m1.tiny",
                                  "user_data_format": "SOFTWARE_CONFIG",
                                  "networks": [{"network": {"get_param": "network"},
                                                "subnet": {"get_param": "subnet"}}]}},
    }
    for k in range(1, chain + 1):
        upstream: Any = {"get_attr": [f"deploy_{k - 1}", "result"]} if k > 1 else "start"
        resources[f"deploy_{k}"] = {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {"name": f"{k * 10}_d{k}", "config": {"get_resource": "config"},
                           "server": {"get_resource": "server"},
                           "input_values": {"upstream": upstream}}}
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "parameters": {"network": {"type": "string"}, "subnet": {"type": "string"}},
        "resources": resources,
        "outputs": {"result": {"value": {"get_attr": [f"deploy_{chain}", "result"]}}}})


def cluster_template(servers: int) -> str:
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {
            "net": {"type": "OS::Neutron::Net", "properties": {"name": "deployments"}},
            "subnet": {"type": "OS::Neutron::Subnet",
                       "properties": {"network": {"get_resource": "net"},
                                      "cidr": "10.0.0.0/16"}},
            "nodes": {"type": "OS::Heat::ResourceGroup", "properties": {
                "count": servers, "resource_def": {
                    "type": "member.yaml",
                    "properties": {"network": {"get_resource": "net"},
                                   "subnet": {"get_resource": "subnet"}}}}},
        },
        "outputs": {"results": {"value": {"get_attr": ["nodes", "result"]}}}})


def hooks_template(count: int) -> str:
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {f"r{i}": {"type": "OS::Heat::TestResource",
                                "properties": {"value": str(i)}} for i in range(count)}})


class Bench:
    """The API over HTTP, the benchmark's database (read only) and the workers' CPU."""

    def __init__(self, api: str, db_url: str, worker_pids: list[int],
                 others: dict[str, int]) -> None:
        import httpx
        import sqlalchemy

        self.http = httpx.Client(base_url=f"{api}/v1/{TENANT}", timeout=60,
                                 follow_redirects=True)
        self.db = sqlalchemy.create_engine(db_url)
        self.pids = worker_pids
        self.others = others  # the API's and the simulated cloud's processes, by name

    def cpu(self) -> float:
        return float(sum(group_cpu(pid) for pid in self.pids))

    def other_cpu(self) -> dict[str, float]:
        """CPU seconds of the API and of the simulated cloud (with the scripts it ran)."""
        tick = os.sysconf("SC_CLK_TCK")
        found = {}
        for name, pid in self.others.items():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            found[name] = sum(int(f) for f in fields[11:15]) / tick
        return found

    def others_since(self, before: dict[str, float], wall: float) -> str:
        return ", ".join(f"{name} {cpu - before[name]:.1f} s CPU "
                         f"({(cpu - before[name]) / wall:.0%} of a core)"
                         for name, cpu in self.other_cpu().items())

    def rows(self, sql: str, **params: Any) -> list[Any]:
        import sqlalchemy

        with self.db.connect() as conn:
            return list(conn.execute(sqlalchemy.text(sql), params).all())

    def query(self, sql: str, **params: Any) -> Any:
        return self.rows(sql, **params)[0][0]

    def create(self, name: str, template: str, **extra: Any) -> str:
        made = self.http.post("/stacks", json={"stack_name": name, "template": template,
                                               "disable_rollback": True, **extra})
        if made.status_code != 201:
            raise SystemExit(f"create {name}: {made.status_code} {made.text[:500]}")
        return str(made.json()["stack"]["id"])

    def stack(self, name: str, sid: str) -> dict[str, Any] | None:
        got = self.http.get(f"/stacks/{name}/{sid}", params={"resolve_outputs": "false"})
        if got.status_code == 404:
            return None
        got.raise_for_status()
        return dict(got.json()["stack"])

    def finished_at(self, sid: str) -> float:
        """When the stack's current traversal finished (wall time, the engine's record)."""
        return float(self.query("SELECT t.finished_at FROM traversals t JOIN stacks s ON "
                                "s.traversal_id = t.id WHERE s.id = :s", s=sid) or time.time())

    def wait(self, name: str, sid: str, every: float = 1.0, timeout: float = 3600,
             sample: Any = None) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            stack = self.stack(name, sid)
            if stack is None or not stack["stack_status"].endswith("IN_PROGRESS"):
                return stack or {"stack_status": "DELETE_COMPLETE (gone)"}
            if sample is not None:
                sample()
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: still {stack['stack_status']} after {timeout} s")
            time.sleep(every)

    def failure(self, name: str, sid: str) -> str:
        events = self.http.get(f"/stacks/{name}/{sid}/events",
                               params={"limit": 1000, "nested_depth": 3}).json()["events"]
        failed = [f"{e['resource_name']}: {e['resource_status_reason']}" for e in events
                  if e["resource_status"].endswith("FAILED")]
        return failed[0] if failed else "(no failed event)"


def deployments(bench: Bench, control: Any, args: argparse.Namespace) -> str:
    """Phase 1: the stack of servers with chained deployments; returns its id."""
    n, chain = args.servers, args.chain
    samples: list[tuple[float, float, int, int]] = []  # wall, CPU, servers done, deps done

    def sample() -> None:
        servers = bench.query(
            "SELECT count(*) FROM resources WHERE type = 'OS::Nova::Server' AND "
            "action = 'CREATE' AND status = 'COMPLETE'")
        done = bench.query(
            "SELECT count(*) FROM resources WHERE type = 'OS::Heat::SoftwareDeployment' AND "
            "action = 'CREATE' AND status = 'COMPLETE'")
        samples.append((time.time(), bench.cpu(), int(servers), int(done)))

    mark = max((r.seq for r in control.agent_runs()), default=0)
    cpu0, others0, started = bench.cpu(), bench.other_cpu(), time.time()
    sid = bench.create("deployments", cluster_template(n),
                       files={"member.yaml": member_template(chain)})
    stack = bench.wait("deployments", sid, sample=sample)
    seen = time.time()
    cpu = bench.cpu() - cpu0
    complete = bench.finished_at(sid)
    wall = complete - started
    print(f"{n} servers x {chain} chained deployments ({n * chain} deployments, "
          f"{n * (chain + 2) + 3} resources), {args.workers} workers x {args.concurrency}, "
          f"agent poll {args.poll:g} s: {stack['stack_status']} in {wall:.1f} s "
          f"(seen by the 1 s poll {seen - complete:.1f} s later)")
    if stack["stack_status"] != "CREATE_COMPLETE":
        print(f"  first failure: {bench.failure('deployments', sid)}")
    print(f"  workers: {cpu:.1f} s CPU over the create, utilisation "
          f"{cpu / (wall * args.workers):.0%} (CPU / wall x workers), "
          f"{cpu / max(n * chain, 1) * 1000:.1f} ms CPU per deployment")
    polls = sum(s.polls for s in control.agent_servers())
    print(f"  besides: {bench.others_since(others0, seen - started)}; the agents polled "
          f"{polls} times ({polls / (seen - started):.0f} per s)")

    runs = control.agent_runs(since=mark)
    expected = [f"{k * 10}_d{k}" for k in range(1, chain + 1)]
    by_server: dict[str, list[Any]] = defaultdict(list)
    for run in runs:
        by_server[run.server_id].append(run)
    in_order = sum([r.name for r in sorted(rs, key=lambda r: r.seq)] == expected
                   for rs in by_server.values())
    bad = sum(r.status_code != 0 or not r.signalled for r in runs)
    print(f"  agent runs: {len(runs)} (expected {n * chain}) on {len(by_server)} servers; "
          f"{in_order} servers ran exactly {chain} in chain order; {bad} runs failed or "
          f"unsignalled")
    if runs:
        first = min(r.started_at for r in runs)
        last = max(r.finished_at for r in runs)
        durations = sorted(r.finished_at - r.started_at for r in runs)
        print(f"  first run started at {first - started:.1f} s, last run finished at "
              f"{last - started:.1f} s; stack complete {complete - last:.2f} s after the "
              f"last run finished (a run: median {durations[len(durations) // 2] * 1000:.0f}"
              f" ms, slowest {durations[-1] * 1000:.0f} ms)")
        active = next((s for s in samples if s[2] >= n), None)
        before = [s for s in samples if s[0] <= last]
        if active is not None and before and before[-1][0] > active[0]:
            end = before[-1]
            span = end[0] - active[0]
            print(f"  agents-only window (every server ACTIVE at {active[0] - started:.1f} s, "
                  f"{active[3]} deployments done, to {end[0] - started:.1f} s, {end[3]} "
                  f"done): {span:.1f} s, workers {end[1] - active[1]:.2f} s CPU = "
                  f"{(end[1] - active[1]) / span:.3f} CPU s per wall s "
                  f"({(end[1] - active[1]) / span / args.workers:.1%} of the workers), "
                  f"{(end[1] - active[1]) / max(end[3] - active[3], 1) * 1000:.1f} ms per "
                  f"deployment completed in it")
        else:
            print("  agents-only window: no sample with every server ACTIVE before the last "
                  "run (too short to sample)")
    results = bench.http.get(f"/stacks/deployments/{sid}/outputs/results").json()
    values = (results.get("output") or {}).get("output_value") or []
    want = "+".join(["start"] + [f"deploy_{k}" for k in range(1, chain + 1)])
    print(f"  output: {sum(v == want for v in values)} of {n} members' results are "
          f"{want!r}")
    return sid


def hooked(bench: Bench, args: argparse.Namespace) -> str:
    """Phase 2: resources paused on a pre-create hook; returns the stack's id."""
    h = args.hooks
    env = {"resource_registry": {"resources": {"r*": {"hooks": "pre-create"}}}}
    started = time.time()
    sid = bench.create("hooks", hooks_template(h), environment=env)
    deadline = time.monotonic() + 600
    while True:
        listed = bench.http.get(f"/stacks/hooks/{sid}/resources").json()["resources"]
        paused = [r for r in listed if PAUSED in (r.get("resource_status_reason") or "")]
        if len(paused) >= h:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"hooks: {len(paused)} of {h} paused after 600 s")
        time.sleep(0.5)
    print(f"{h} test resources with a pre-create hook: all paused {time.time() - started:.1f}"
          f" s after the create")
    leases = bench.query("SELECT count(*) FROM resources WHERE stack_id = :s AND "
                         "lease_owner IS NOT NULL", s=sid)
    counts = dict(bench.rows(
        "SELECT n.state, count(*) FROM nodes n JOIN stacks s ON s.traversal_id = "
        "n.traversal_id WHERE s.id = :s GROUP BY n.state", s=sid))
    print(f"  resources holding a lease: {leases}; nodes PARKED: {counts.get('PARKED', 0)} "
          f"(all nodes by state: {dict(sorted(counts.items()))})")
    cpu0, others0, mark = bench.cpu(), bench.other_cpu(), time.monotonic()
    time.sleep(10)
    cpu = bench.cpu() - cpu0
    print(f"  workers while every resource waits: {cpu:.2f} s CPU over "
          f"{time.monotonic() - mark:.1f} s ({cpu / 10:.3f} CPU s per wall s); besides: "
          f"{bench.others_since(others0, 10)}")
    cleared = time.time()
    for i in range(h):
        answer = bench.http.post(f"/stacks/hooks/{sid}/resources/r{i}/signal",
                                 json={"unset_hook": "pre-create"})
        if answer.status_code >= 300:
            print(f"  clearing r{i}: {answer.status_code} {answer.text[:200]}")
    signalled = time.time()
    stack = bench.wait("hooks", sid)
    complete = bench.finished_at(sid)
    print(f"  hooks cleared ({h} signals in {signalled - cleared:.2f} s): "
          f"{stack['stack_status']} {complete - cleared:.2f} s after the first signal, "
          f"{complete - signalled:.2f} s after the last")
    return sid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", type=int, default=200)
    parser.add_argument("--chain", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--hooks", type=int, default=50)
    parser.add_argument("--redis-db", type=int, default=8,
                        help="the broker's Redis database index (the integration tests "
                             "claim 11-15, storm.py uses 9)")
    args = parser.parse_args()

    import httpx

    with tempfile.TemporaryDirectory(prefix="sw-deployments-") as folder:
        n = args.servers
        seed = Path(folder) / "seed.yaml"
        seed.write_text(f"compute_quota: {{instances: {n * 2}, cores: {n * 2}, "
                        f"ram: {n * 2048}}}\nnetwork_quota: {{port: {n * 3}}}\n")
        cloud, control, env = start_simcloud(
            folder, free_port(), ["--build-seconds", "0", "--agent-poll-interval",
                                  str(args.poll), "--seed", str(seed), "--execute-scripts"])
        api_port = free_port()
        api_url = f"http://127.0.0.1:{api_port}"
        env = {**env, "CONVERGENCE_PUBLIC_URL": api_url}
        workers = api = bench = None
        try:
            distributed.REDIS_DB = args.redis_db  # read by start_cluster
            url, broker, workers = start_cluster(folder, args.workers, env, args.concurrency)
            api = subprocess.Popen(
                [sys.executable, "-m", "convergence", "api", "--port", str(api_port)],
                env={**os.environ, **env, "CONVERGENCE_DATABASE_URL": url,
                     "CONVERGENCE_BROKER_URL": broker,
                     "CONVERGENCE_DATA_DIR": f"{folder}/data"},
                stdout=subprocess.DEVNULL, stderr=(Path(folder) / "api.log").open("wb"))
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{api_url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if api.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the API did not start:\n" +
                                     (Path(folder) / "api.log").read_text()[-3000:])
                time.sleep(0.2)
            print(f"database {workers.database}, Redis db {args.redis_db}, API {api_url}")
            bench = Bench(api_url, url, [p.pid for p in workers.processes],
                          {"API": api.pid, "simulated cloud": cloud.pid})
            baseline = control.objects()  # the seed's own (the public network...)

            made = [("deployments", deployments(bench, control, args))]
            if args.hooks:
                made.append(("hooks", hooked(bench, args)))

            started = time.time()
            for name, sid in made:
                bench.http.delete(f"/stacks/{name}/{sid}").raise_for_status()
            for name, sid in made:
                print(f"  delete {name}: {bench.wait(name, sid)['stack_status']}")
            now = control.objects()
            left = {k: v - baseline.get(k, 0) for k, v in now.items()
                    if v != baseline.get(k, 0) and not k.startswith("agent")}
            print(f"  deletes in {time.time() - started:.1f} s; servers in the cloud: "
                  f"{now.get('server', 0)}; left beyond the seed's objects: "
                  f"{left or 'nothing'} (Neutron makes a project's default security "
                  f"group with its first port)")
            for f in sorted(Path(folder).glob("*.log")):
                errors = [line for line in f.read_text(errors="replace").splitlines()
                          if "ERROR" in line or "Traceback" in line]
                if errors:
                    print(f"  {f.name}: {len(errors)} error lines, first: {errors[0][:200]}")
        finally:
            if bench is not None:
                bench.http.close()
                bench.db.dispose()
            if api is not None:
                api.terminate()
                api.wait(10)
            if workers is not None:
                workers.stop()
            cloud.terminate()
            cloud.wait(10)


if __name__ == "__main__":
    main()
