"""The Magnum example as a user drives it: ``convergence --url ... stack create --wait``
against a real ``convergence api`` process whose engine reaches a simulated cloud, the CLI
sending the nested template from disk and following the event stream (no polling) until the
cluster is complete, then scaling a worker group the same way.

What is checked is the CLI's own output (the stream's events and the final status) and what
the cloud holds, through the test's own openstacksdk connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openstack
import pytest
from click.testing import CliRunner

from convergence.cli import cli
from convergence_simcloud.seed import Seed, default_quota
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.api_process import api_process
from tests.openstack.conftest import _region

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "magnum"


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    quota = {**default_quota(), "instances": 100, "cores": 1000, "ram": 10_000_000}
    state = SimCloud(Seed(compute_quota=quota), options=Options(build_seconds=0.5))
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        yield url, path


def test_the_cluster_over_the_api_following_the_event_stream(
        cloud: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, clouds = cloud
    env = {"OS_CLOUD": "simcloud", "OS_CLIENT_CONFIG_FILE": str(clouds)}
    with api_process(tmp_path, "magnum.db", env) as (_, url, _log):
        monkeypatch.setenv("CONVERGENCE_PROJECT_ID", "magnum")
        monkeypatch.setenv("CONVERGENCE_DATABASE_URL", "sqlite:////nonexistent/never.db")

        def run(*args: str) -> str:
            result = CliRunner().invoke(cli, ["--url", url, *args], catch_exceptions=False)
            assert result.exit_code == 0, result.output
            return result.output

        created = run("stack", "create", "k8s", "-t", str(EXAMPLE / "cluster.yaml"), "--wait")
        assert "k8s: CREATE_COMPLETE" in created  # told by the stream, as it happened
        assert "9/9 resources done" in created
        shown = json.loads(run("output", "show", "k8s", "worker_a_addresses",
                               "-f", "json"))
        assert len(shown["output_value"]) == 5
        scaled = run("stack", "update", "k8s", "--existing", "-P", "worker_a_count=7",
                     "--wait")
        assert "k8s: UPDATE_COMPLETE" in scaled
    sdk = openstack.connection.Connection(config=_region(clouds))
    try:
        assert len(list(sdk.compute.servers())) == 3 + 7 + 3
    finally:
        sdk.close()
