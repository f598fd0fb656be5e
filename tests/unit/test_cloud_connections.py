"""The connections a process keeps to its clouds: one per cloud and trust, the trusted ones
bounded (a worker serving many callers' stacks does not keep one per stack for ever)."""

from __future__ import annotations

from typing import Any

import pytest

from convergence.plugins.base import CloudScope
from convergence.plugins.openstack import clouds
from convergence.plugins.openstack.clouds import CloudConfig, Clouds


class Connection:
    def __init__(self, config: CloudConfig, trust_id: str | None) -> None:
        self.cloud, self.trust_id, self.closed = config.cloud, trust_id, False

    def close(self) -> None:
        self.closed = True


def test_one_connection_per_cloud_and_trust_the_trusted_ones_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []

    def connect(config: CloudConfig, trust_id: str | None = None) -> Connection:
        made.append(Connection(config, trust_id))
        return made[-1]

    monkeypatch.setattr(clouds, "_connect", connect)
    monkeypatch.setattr(clouds, "TRUSTED_CONNECTIONS", 2)
    backend = Clouds(CloudConfig("engine", "/nowhere/clouds.yaml"))
    own = backend.connection()
    assert backend.connection(CloudScope()) is own and own.trust_id is None
    a = backend.connection(CloudScope(trust_id="a"))
    b = backend.connection(CloudScope(trust_id="b"))
    assert backend.connection(CloudScope(trust_id="a")) is a  # a is now the newer
    c = backend.connection(CloudScope(trust_id="c"))
    assert (a.closed, b.closed, c.closed, own.closed) == (False, True, False, False)
    assert backend.connection(CloudScope(trust_id="b")) is not b  # made again
    other = backend.connection(CloudScope(cloud="other"))
    assert (other.cloud, other.trust_id) == ("other", None) and len(made) == 6
