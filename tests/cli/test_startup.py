"""The command line answers at once: what ``--help`` and a remote ``stack list`` import.

Each command runs in a fresh interpreter (``python -c``), as a user's shell runs it, and the
modules it imported are read from ``sys.modules`` afterwards: ``convergence --help`` loads no
store, engine, use case, queue, web or HTTP library, and a remote ``stack list`` (against a
real ``convergence api`` process) loads the HTTP client but no store, engine or use case. The
wall times are measured by ``benchmarks/cli_startup.py``, not asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.api_process import running_api

# Runs the CLI with the arguments after the first, then writes the names of the modules it
# imported (as JSON) to the file named by the first.
PROBE = """
import json, sys
from convergence.cli import main
out, sys.argv = sys.argv[1], ["convergence", *sys.argv[2:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""

NOT_ON_HELP = ("sqlalchemy", "alembic", "celery", "kombu", "fastapi", "starlette", "uvicorn",
               "httpx", "networkx", "convergence.engine", "convergence.store",
               "convergence.services", "convergence.runtime", "convergence.template",
               "convergence.api", "convergence_simcloud")
NOT_REMOTE = ("sqlalchemy", "alembic", "celery", "kombu", "fastapi", "uvicorn",
              "convergence.engine", "convergence.store", "convergence.services",
              "convergence.runtime", "convergence.dispatch", "convergence.workers")


def probe(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
          ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``convergence ARGS`` in a fresh interpreter; its result and imported modules."""
    found = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", PROBE, str(found), *args],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert found.exists(), done.stderr
    answer = json.loads(found.read_text())
    assert answer["code"] in (0, None), done.stdout + done.stderr
    return done, set(answer["modules"])


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The packages of ``packages`` that were imported (a package or any module in it)."""
    return [p for p in packages if any(m == p or m.startswith(p + ".") for m in modules)]


def test_help_imports_no_store_engine_or_library(tmp_path: Path) -> None:
    done, modules = probe(tmp_path, "--help", env={"CONVERGENCE_URL": ""})
    assert "Create, update, delete and look at stacks." in done.stdout
    assert loaded(modules, NOT_ON_HELP) == []


def test_a_group_help_imports_no_store_or_engine(tmp_path: Path) -> None:
    done, modules = probe(tmp_path, "stack", "--help", env={"CONVERGENCE_URL": ""})
    assert "create" in done.stdout and "failures" in done.stdout
    assert loaded(modules, NOT_ON_HELP) == []


def test_remote_stack_list_imports_the_http_client_only(tmp_path: Path) -> None:
    with running_api(tmp_path) as url:
        template = "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n"
        httpx.post(f"{url}/v1/startup/stacks", json={"stack_name": "listed",
                                                     "template": template},
                   timeout=30).raise_for_status()
        done, modules = probe(tmp_path, "stack", "list", "-f", "json",
                              env={"CONVERGENCE_URL": url, "CONVERGENCE_PROJECT_ID": "startup"})
    assert [row["stack_name"] for row in json.loads(done.stdout)] == ["listed"]
    assert "httpx" in modules and "convergence.cli.remote" in modules
    assert loaded(modules, NOT_REMOTE) == []
