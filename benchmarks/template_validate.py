"""Parse, validate and build the dependency graph of generated templates; print figures.

    python benchmarks/template_validate.py                 # 1,000 / 10,000 / 100,000
    python benchmarks/template_validate.py --sizes 10000   # one size

Each size runs in a fresh process (so peak memory is that size's own) on one core. The
template mixes get_attr, get_resource, depends_on, str_replace, list_join and conditions.
Figures: seconds per phase, resources per second, peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def generate(n: int) -> str:
    """A template of ``n`` resources; a quarter of them under a condition."""
    lines = [
        "heat_template_version: 2018-08-31",
        "description: generated benchmark template",
        "parameters:",
        "  prefix: {type: string, default: bench}",
        "  enabled: {type: boolean, default: true}",
        "conditions:",
        "  active: {get_param: enabled}",
        "  inactive: {not: active}",
        "resources:",
    ]
    for i in range(n):
        lines.append(f"  r{i}:")
        lines.append("    type: OS::Heat::TestResource")
        if i % 4 == 3:
            lines.append("    condition: active")
        lines.append("    properties:")
        kind = i % 5
        if i == 0 or kind == 0:
            lines.append(f"      value: {{list_join: ['-', [{{get_param: prefix}}, v{i}]]}}")
        elif kind == 1:
            lines.append(f"      value: {{get_attr: [r{i - 1}, output]}}")
        elif kind == 2:
            lines.append("      value:")
            lines.append("        str_replace:")
            lines.append("          template: node-$ref-$i")
            lines.append(f"          params: {{$ref: {{get_resource: r{i // 2}}}, $i: '{i}'}}")
        elif kind == 3:
            lines.append(f"      value: {{if: [active, {{get_attr: [r{i - 3}, output]}}, none]}}")
        else:
            lines.append(f"      value: plain-{i}")
            lines.append(f"    depends_on: [r{i - 1}, r{i // 3}]")
    lines.append("outputs:")
    lines.append(f"  last: {{value: {{get_attr: [r{n - 1 - (n % 4 == 0)}, output]}}}}")
    return "\n".join(lines) + "\n"


def run_one(n: int) -> dict[str, float]:
    from convergence.graph import dependency_graph
    from convergence.plugins.registry import PluginRegistry
    from convergence.template import Limits, load_document, parse_template, validate_stack

    catalog = PluginRegistry.from_entry_points()
    text = generate(n)
    limits = Limits(max_bytes=len(text) + 1)
    t0 = time.process_time()
    data = load_document(text, "template", limits)
    t1 = time.process_time()
    template = parse_template(data, limits=limits)
    t2 = time.process_time()
    stack = validate_stack(template, catalog=catalog, parameters={}, limits=limits)
    t3 = time.process_time()
    graph = dependency_graph(stack.dependencies)
    t4 = time.process_time()
    assert graph.number_of_nodes() == n
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "resources": n, "bytes": len(text), "load_s": t1 - t0, "parse_s": t2 - t1,
        "validate_s": t3 - t2, "graph_s": t4 - t3, "total_s": t4 - t0,
        "edges": graph.number_of_edges(), "peak_rss_mib": peak_kib / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child)))
        return
    print(f"{'resources':>10} {'MiB in':>7} {'load s':>7} {'parse s':>8} {'valid s':>8} "
          f"{'graph s':>8} {'total s':>8} {'res/s':>9} {'peak MiB':>9}")
    for n in args.sizes:
        # One core, one fresh process per size.
        cmd = [sys.executable, __file__, "--child", str(n)]
        if sys.platform.startswith("linux"):
            cmd = ["taskset", "-c", "0", *cmd]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": "0"}).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{n:>10} {r['bytes'] / 2**20:>7.1f} {r['load_s']:>7.2f} {r['parse_s']:>8.2f} "
              f"{r['validate_s']:>8.2f} {r['graph_s']:>8.2f} {r['total_s']:>8.2f} "
              f"{n / r['total_s']:>9.0f} {r['peak_rss_mib']:>9.0f}")


if __name__ == "__main__":
    main()
