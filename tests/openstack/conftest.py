"""The OpenStack resource types against the simulated cloud, on the embedded tier.

One clock drives the engine and the cloud: a test waits for its stack, the in-process
dispatcher moves the clock to the next poll, and the cloud's servers and volumes build as
that time passes, so a 20-second build takes no wall time. The engine reaches the cloud the
openstacksdk way (a ``clouds.yaml`` named by ``OS_CLOUD``); the tests look at what is real
through their own unmodified openstacksdk connection over HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openstack
import pytest

from convergence.ports.clock import ManualClock
from convergence.ports.views import StackView
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings
from convergence_simcloud.client import SimControl
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.engine.harness import TENANT, Story


@dataclass
class Cloud:
    """The simulated cloud of a test: its state, its control plane and an SDK connection."""

    state: SimCloud
    url: str
    control: SimControl
    sdk: openstack.connection.Connection
    clouds_file: Path

    def environ(self) -> dict[str, str]:
        return {"OS_CLOUD": "simcloud", "OS_CLIENT_CONFIG_FILE": str(self.clouds_file)}

    def count(self, kind: str) -> int:
        """How many objects of ``kind`` the cloud holds (every project's)."""
        with self.state.locked():
            return len(self.state.kind(kind))

    def names(self, kind: str) -> list[str]:
        with self.state.locked():
            return sorted(str(o.get("name")) for o in self.state.kind(kind).values())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(time.time())  # tokens expire by the wall clock in keystoneauth


@pytest.fixture
def cloud(clock: ManualClock, tmp_path: Path) -> Iterator[Cloud]:
    state = SimCloud(options=Options(build_seconds=20.0), clock=clock)
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        sdk = openstack.connection.Connection(config=_region(path))  # the test's own
        yield Cloud(state, url, SimControl(url), sdk, path)
        sdk.close()


def _region(path: Path) -> Any:
    from openstack.config import loader

    return loader.OpenStackConfig(config_files=[str(path)], load_envvars=False) \
        .get_one(cloud="simcloud")


@pytest.fixture
def rt(cloud: Cloud, clock: ManualClock, tmp_path: Path) -> Iterator[Runtime]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", batch_size=50)
    runtime = open_runtime(settings, clock=clock, environ=cloud.environ())
    yield runtime
    assert runtime.inprocess is not None
    assert runtime.inprocess.errors == []
    runtime.store.engine.dispose()


@pytest.fixture
def story(rt: Runtime) -> Story:
    def wait(stack_id: str) -> StackView:
        return running.wait_for_stack(rt, TENANT, stack_id)

    return Story(rt, "stack", wait)
