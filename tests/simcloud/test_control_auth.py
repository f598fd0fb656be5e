"""Where the simulated cloud may be reached and who may drive its control plane.

``convergence simcloud`` listens on loopback only unless told otherwise (``--allow-remote``);
served elsewhere its ``/_sim/`` control plane answers only requests carrying the control token
(given, or generated and printed on stderr), which ``SimControl`` sends; on loopback it stays
open unless a token is given. The command's stdout is the ``clouds.yaml`` alone: its messages
and the access log are on stderr. The real command runs as a process on a free port; every
request goes to 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from convergence_simcloud.client import ControlError, SimControl
from convergence_simcloud.serve import running
from convergence_simcloud.state import Options, SimCloud
from tests.api_process import free_port
from tests.simcloud.conftest import connect

HEADER = "X-Sim-Control-Token"
PRINTED = re.compile(r"control token \(send it as X-Sim-Control-Token to /_sim/\): (\S+)")


def simcloud(*args: str, env: dict[str, str] | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``convergence simcloud ARGS`` run to its end (a server that starts fails the test)."""
    try:
        return subprocess.run([sys.executable, "-m", "convergence", "simcloud", *args],
                              capture_output=True, text=True, timeout=timeout, check=False,
                              env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"convergence simcloud {' '.join(args)} served instead of refusing")


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str  # on 127.0.0.1 whatever the address it listens on
    stdout: Path
    stderr: Path


@contextmanager
def served(folder: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``convergence simcloud ARGS`` on a free port, once it printed its clouds.yaml."""
    port = free_port()
    out, err = folder / f"simcloud-{port}.out", folder / f"simcloud-{port}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "convergence", "simcloud", "--port",
                                    str(port), *args], stdout=stdout, stderr=stderr, env=env)
    try:
        deadline = time.monotonic() + 30
        while "project_domain_name" not in out.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("simcloud did not start:\n" + err.read_text())
            time.sleep(0.05)
        yield Served(process, f"http://127.0.0.1:{port}", out, err)
    finally:
        process.terminate()
        assert process.wait(15) in (0, -15)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", socket.gethostname()])
def test_off_loopback_the_command_refuses_to_start_without_allow_remote(host: str) -> None:
    refused = simcloud("--host", host, "--port", str(free_port()))
    assert refused.returncode == 2
    assert f"refusing to listen on {host}" in refused.stderr
    assert "--allow-remote" in refused.stderr
    assert refused.stdout == ""


def test_off_loopback_the_control_plane_wants_the_printed_token(tmp_path: Path) -> None:
    with served(tmp_path, "--host", "0.0.0.0", "--allow-remote") as cloud:
        found = PRINTED.search(cloud.stderr.read_text())
        assert found is not None, cloud.stderr.read_text()
        token = found.group(1)
        missing = httpx.get(f"{cloud.url}/_sim/rules")
        assert missing.status_code == 401 and HEADER in missing.json()["error"]["message"]
        assert httpx.get(f"{cloud.url}/_sim/rules",
                         headers={HEADER: "not-the-token"}).status_code == 403
        assert httpx.put(f"{cloud.url}/_sim/agent", json={"enabled": False}).status_code == 401
        assert httpx.get(f"{cloud.url}/_sim/agent", headers={HEADER: token}).json()["enabled"]
        with pytest.raises(ControlError) as refused:
            SimControl(cloud.url).add_rule("unavailable", service="compute")
        assert refused.value.status == 401
        control = SimControl(cloud.url, token=token)
        rule = control.add_rule("unavailable", service="network", count=1)
        assert [r.id for r in control.rules()] == [rule.id]
        assert connect(cloud.url).authorize()  # Keystone asks for its own credentials only
    stdout, stderr = cloud.stdout.read_text(), cloud.stderr.read_text()
    # stdout: the clouds.yaml and nothing else; the messages and the access log on stderr
    assert yaml.safe_load(stdout)["clouds"]["simcloud"]["auth"]["auth_url"] == \
        f"{cloud.url}/v3"
    assert token not in stdout and "GET" not in stdout and "INFO" not in stdout
    assert '"GET /_sim/rules HTTP/1.1" 401' in stderr
    assert "off loopback" in stderr


def test_a_given_token_is_wanted_even_on_loopback_and_not_printed(tmp_path: Path) -> None:
    env = {**os.environ, "CONVERGENCE_SIMCLOUD_CONTROL_TOKEN": "given-control-token"}
    with served(tmp_path, env=env) as cloud:
        assert httpx.get(f"{cloud.url}/_sim/objects").status_code == 401
        control = SimControl(cloud.url, token="given-control-token")
        assert control.objects()["network"] == 1  # the seed's public network
    assert "given-control-token" not in cloud.stderr.read_text() + cloud.stdout.read_text()


def test_in_process_the_control_plane_checks_the_token_of_its_options() -> None:
    with running(SimCloud(options=Options(control_token="in-process"))) as url:
        assert httpx.get(f"{url}/_sim/journal").status_code == 401
        assert httpx.get(f"{url}/_sim/journal", headers={HEADER: "other"}).status_code == 403
        assert SimControl(url, token="in-process").rules() == []
        assert httpx.get(f"{url}/v3").status_code == 200  # the services are not its concern
    with running(SimCloud()) as url:  # no token: open, as on loopback
        assert SimControl(url).rules() == []
