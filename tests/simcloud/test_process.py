"""The real ``convergence simcloud`` process: it prints a ``clouds.yaml`` entry the ``openstack``
CLI accepts as it is, and with ``--state`` what it knew (users, projects, application
credentials, tokens) survives a restart."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.api_process import free_port
from tests.simcloud.conftest import connect

ROOT = Path(__file__).resolve().parents[2]
OPENSTACK = ROOT / ".venv" / "bin" / "openstack"


@contextmanager
def simcloud_process(folder: Path, *args: str) -> Iterator[str]:
    """Run ``convergence simcloud ARGS`` on a free port; yield the ``clouds.yaml`` it printed."""
    port = free_port()
    log = (folder / f"simcloud-{port}.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "convergence", "simcloud", "--port",
                             str(port), *args], stdout=subprocess.PIPE, stderr=log, text=True)
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "project_domain_name" in line:
                done.set()
        done.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not done.wait(30) or proc.poll() is not None:
            pytest.fail("simcloud did not start:\n" + "".join(lines) +
                        (folder / f"simcloud-{port}.log").read_text())
        yield "".join(line for line in lines if not line.startswith("#"))
    finally:
        proc.terminate()
        assert proc.wait(15) in (0, -15)  # uvicorn ends by the signal it was sent
        log.close()


def test_the_printed_entry_serves_the_openstack_cli_and_state_survives_a_restart(
        tmp_path: Path) -> None:
    state = tmp_path / "cloud.json"
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump({
        "users": [{"name": "demo", "password": "demo", "projects": {"demo": ["member"]}}],
        "application_credentials": [{"name": "ci", "secret": "s3cret", "user": "demo",
                                     "project": "demo"}]}))
    with simcloud_process(tmp_path, "--state", str(state), "--seed", str(seed)) as entry:
        config = yaml.safe_load(entry)
        cloud = config["clouds"]["simcloud"]
        assert cloud["region_name"] == "RegionOne"
        assert cloud["identity_api_version"] == 3
        clouds_file = tmp_path / "clouds.yaml"
        clouds_file.write_text(entry)
        env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(clouds_file)}
        env = {k: v for k, v in env.items() if not k.startswith("OS_") or
               k == "OS_CLIENT_CONFIG_FILE"}
        issued = subprocess.run([str(OPENSTACK), "--os-cloud", "simcloud", "token", "issue",
                                 "-f", "yaml"], env=env, capture_output=True, text=True,
                                timeout=60, check=False)
        assert issued.returncode == 0, issued.stderr
        token = yaml.safe_load(issued.stdout)
        assert token["id"] and token["project_id"]
        url = cloud["auth"]["auth_url"].removesuffix("/v3")
        demo_token = connect(url, username="demo", password="demo",
                             project_name="demo").authorize()
        ids = {p["name"]: p["id"] for p in
               connect(url).identity.get("/projects").json()["projects"]}

    assert state.exists()
    with simcloud_process(tmp_path, "--state", str(state)) as entry:
        url = yaml.safe_load(entry)["clouds"]["simcloud"]["auth"]["auth_url"].removesuffix(
            "/v3")
        # The token issued before the restart is still good, for the same project.
        again = connect(url, token=demo_token, username=None, password=None,
                        user_domain_name=None, auth_type="v3token", project_name="demo")
        assert again.current_project_id == ids["demo"]
        creds = connect(url, auth_type="v3applicationcredential", password=None,
                        username="demo", project_name=None, project_domain_name=None,
                        application_credential_name="ci",
                        application_credential_secret="s3cret")
        assert creds.identity.get("/auth/projects").json()["projects"][0]["id"] == ids["demo"]
