"""Fixtures for the simulated cloud's tests: a cloud served in-process on an ephemeral port,
driven only by unmodified openstacksdk (and the ``openstack`` CLI) over real HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import openstack
import pytest

from convergence.ports.clock import ManualClock
from convergence_simcloud.seed import Seed
from convergence_simcloud.serve import running
from convergence_simcloud.state import Options, SimCloud

Start = Callable[..., tuple[SimCloud, str]]


@pytest.fixture
def start_cloud() -> Iterator[Start]:
    """Start a cloud (``seed``, ``options``) on a clock the test moves; its state and URL."""
    with ExitStack() as stack:
        def start(seed: Seed | None = None, options: Options | None = None,
                  ) -> tuple[SimCloud, str]:
            cloud = SimCloud(seed, options, clock=ManualClock(time.time()))
            return cloud, stack.enter_context(running(cloud))

        yield start


@pytest.fixture
def cloud_url(start_cloud: Start) -> str:
    return start_cloud()[1]


def connect(url: str, **auth: Any) -> openstack.connection.Connection:
    """An openstacksdk connection to the simulated cloud (the admin user unless told)."""
    settings: dict[str, Any] = {
        "auth_url": f"{url}/v3", "username": "admin", "password": "admin",
        "project_name": "admin", "user_domain_name": "Default",
        "project_domain_name": "Default", "region_name": "RegionOne",
        "identity_api_version": "3"}
    settings.update(auth)
    return openstack.connect(**{k: v for k, v in settings.items() if v is not None})
