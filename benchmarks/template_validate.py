"""Accept generated templates as the API does (parse, validate, dependency graph); print figures.

    python benchmarks/template_validate.py                          # 10,000 / 100,000 / 1,000,000
    python benchmarks/template_validate.py --sizes 10000            # one size
    python benchmarks/template_validate.py --format json            # the template sent as JSON

What is measured is ``convergence.services.templates.accept``, the path a stack create or
update takes before anything is stored: the size checks, the parse (YAML or JSON, then the
template's functions and references), the validation against the installed plugins' types,
the dependency graph with its cycle check, and the content address the definition is kept
under. Each size runs in a fresh process (so peak memory is that size's own) on one core. The
template mixes get_attr, get_resource, depends_on, str_replace, list_join and conditions.

Figures: CPU seconds per phase (load: text to data; parse: data to a Template; validate:
types, properties, attributes; graph: dependencies and cycles; other: the rest of accept,
size checks and hashing), resources per second, peak resident memory of the process, and the
time per resource of each size over that of the size before it (1.00: linear).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


def _resource_lines(i: int) -> list[str]:
    lines = [f"  r{i}:", "    type: OS::Heat::TestResource"]
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
    return lines


def generate(n: int) -> str:
    """A YAML template of ``n`` resources; a quarter of them under a condition."""
    head = [
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
    tail = ["outputs:", f"  last: {{value: {{get_attr: [r{n - 1 - (n % 4 == 0)}, output]}}}}"]
    # One string per resource (not per line): the generator's own garbage stays small
    # beside what is measured.
    parts = ["\n".join(head)]
    parts.extend("\n".join(_resource_lines(i)) for i in range(n))
    parts.append("\n".join(tail))
    return "\n".join(parts) + "\n"


def generate_json(n: int) -> str:
    """The same template as JSON text, as heatclient sends it (a JSON object in the body)."""
    from convergence.template.source import Limits, load_document

    text = generate(n)
    data = load_document(text, "template", Limits(max_bytes=len(text) + 1))
    del text
    return json.dumps(data)


class Phases:
    """CPU seconds spent in the functions the accept path calls, by phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, module: Any, name: str, phase: str) -> None:
        inner: Callable[..., Any] = getattr(module, name)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.process_time() - t0

        setattr(module, name, timed)


def run_one(n: int, fmt: str) -> dict[str, Any]:
    import convergence.engine.definitions as definitions
    import convergence.template.parse as parse
    import convergence.template.validate as validate
    from convergence.engine.definitions import DefinitionCache
    from convergence.plugins.registry import PluginRegistry
    from convergence.ports.views import template_id
    from convergence.services import templates
    from convergence.settings import Settings

    registry = PluginRegistry.from_entry_points()
    text = generate_json(n) if fmt == "json" else generate(n)
    size = len(text.encode())
    settings = Settings(database_url="sqlite://", max_template_bytes=size + 1,
                        max_request_bytes=size + 1024)
    cache = DefinitionCache(lambda tid: content, registry)
    rt = SimpleNamespace(settings=settings, registry=registry,
                         engine=SimpleNamespace(definitions=cache))
    content = templates.template_content(text, None, (), {})
    del text

    phases = Phases()
    phases.wrap(parse, "load_tree", "load")  # inside parse_collecting
    phases.wrap(definitions, "parse_collecting", "parse+load")
    phases.wrap(definitions, "validate_stack", "validate+graph")
    phases.wrap(validate, "resource_dependencies", "graph")
    phases.wrap(validate, "find_cycles", "graph")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()
    templates.accept(rt, content)
    total = time.process_time() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    definition = cache.get(template_id(content))
    assert len(definition.dependencies) == n, len(definition.dependencies)
    s = phases.seconds
    load, graph = s.get("load", 0.0), s.get("graph", 0.0)
    parse_s = s.get("parse+load", 0.0) - load
    validate_s = s.get("validate+graph", 0.0) - graph
    return {
        "resources": n, "bytes": size, "load_s": load, "parse_s": parse_s,
        "validate_s": validate_s, "graph_s": graph,
        "other_s": total - load - parse_s - validate_s - graph, "total_s": total,
        "edges": sum(len(d) for d in definition.dependencies.values()),
        "peak_rss_mib": peak_kib / 1024, "start_rss_mib": rss_before / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000, 1000000])
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.format)))
        return
    print(f"{'resources':>10} {'MiB in':>7} {'load s':>7} {'parse s':>8} {'valid s':>8} "
          f"{'graph s':>8} {'other s':>8} {'total s':>8} {'res/s':>9} {'peak MiB':>9}")
    per_resource: list[tuple[int, float]] = []
    for n in args.sizes:
        # One core, one fresh process per size.
        cmd = [sys.executable, __file__, "--child", str(n), "--format", args.format]
        if sys.platform.startswith("linux"):
            cmd = ["taskset", "-c", "0", *cmd]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": "0"}).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{n:>10} {r['bytes'] / 2**20:>7.1f} {r['load_s']:>7.2f} {r['parse_s']:>8.2f} "
              f"{r['validate_s']:>8.2f} {r['graph_s']:>8.2f} {r['other_s']:>8.2f} "
              f"{r['total_s']:>8.2f} {n / r['total_s']:>9.0f} {r['peak_rss_mib']:>9.0f}",
              flush=True)
        per_resource.append((n, r["total_s"] / n))
    for (n0, t0), (n1, t1) in itertools.pairwise(per_resource):
        print(f"time per resource, {n1:,} over {n0:,}: {t1 / t0:.2f}")


if __name__ == "__main__":
    main()
