"""Notification webhooks through a real ``convergence api`` process with real workers.

The API process has a broker configured, so its deliverer thread only fans out and sends the
``convergence.webhooks.deliver`` task; a ``convergence worker`` of the ``cluster`` does the
POST. The loopback receiver of ``tests/api/test_webhooks.py`` answers 500 to the first two
tries of every event and 200 to the third.

The workers' environment is the cluster's (a backoff of 1s, 8 attempts) and they cannot be
restarted, so the delivery settings given to the API process (``CONVERGENCE_WEBHOOK_*``) reach
them in the task's payload: each test starts an API process of its own, since the settings are
the sending process's. The receiver is on loopback, which webhooks reach only when the operator
allows it: the API process is told to (``CONVERGENCE_WEBHOOK_ALLOWED_NETWORKS``), and its
workers deliver under the networks the task carries.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from convergence.services import webhooks
from tests.api.test_stream import TEMPLATE
from tests.api.test_webhooks import SECRET, Receiver, receiver, subscribe, wait_for
from tests.integration.conftest import ApiProcess, Cluster, run_api

__all__ = ["receiver"]  # the fixture, imported to be used here

WAIT_SECONDS = 60.0
LOOPBACK = "127.0.0.0/8"
END = "orchestration.stack.create.end"


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def logs(cluster: Cluster, api: ApiProcess) -> str:
    return "\n".join([api.tail(), cluster.logs_tail()])


@pytest.fixture
def api(cluster: Cluster) -> Iterator[ApiProcess]:
    """An API process whose deliveries retry after 0.05s, 0.1s ... up to 5 attempts."""
    with run_api(cluster, f"hooks-{uuid.uuid4().hex[:6]}",
                 CONVERGENCE_WEBHOOK_BACKOFF_SECONDS="0.05",
                 CONVERGENCE_WEBHOOK_MAX_ATTEMPTS="5",
                 CONVERGENCE_WEBHOOK_ALLOWED_NETWORKS=LOOPBACK) as server:
        yield server


@pytest.fixture
def http(api: ApiProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=httpx.Timeout(20.0)) as c:
        yield c


def create(http: httpx.Client, tenant_id: str, name: str) -> str:
    r = http.post(f"/v1/{tenant_id}/stacks", json={"stack_name": name, "template": TEMPLATE})
    assert r.status_code == 201, r.text
    stack_id: str = r.json()["stack"]["id"]
    return stack_id


def complete(http: httpx.Client, tenant_id: str, stack_id: str) -> bool:
    r = http.get(f"/v1/{tenant_id}/stacks/{stack_id}", follow_redirects=True)
    return r.status_code == 200 and r.json()["stack"]["stack_status"] == "CREATE_COMPLETE"


def worker_logs(cluster: Cluster) -> str:
    return "\n".join(w.log.read_text(errors="replace") for w in cluster.workers
                     if w.log.exists())


def test_a_worker_delivers_on_the_third_try_signed_with_a_stable_event_id(
        cluster: Cluster, api: ApiProcess, http: httpx.Client, receiver: Receiver) -> None:
    mine, other = tenant(), tenant()
    sub = subscribe(http, receiver.url, tenant=mine, events=[END])
    theirs = create(http, other, "not-mine")
    stack_id = create(http, mine, "hooked")

    def ends() -> list[str]:
        return [r.event_id for r in receiver.delivered()]

    try:
        wait_for(lambda: bool(ends()), WAIT_SECONDS)
        wait_for(lambda: complete(http, other, theirs), WAIT_SECONDS)
    except AssertionError:
        pytest.fail("no delivery in time\n" + logs(cluster, api), pytrace=False)

    [got] = receiver.delivered()
    tries = receiver.of(got.event_id)
    assert [t.status for t in tries] == [500, 500, 200]  # the third try delivers
    assert len({t.body for t in tries}) == 1  # the same event id and body on every try
    assert all(webhooks.verify(SECRET, t.body, t.signature) for t in tries)
    assert not webhooks.verify("another secret", got.body, got.signature)
    body = json.loads(got.body)
    assert body["event_id"] == got.event_id
    assert body["event_type"] == END
    assert body["payload"]["stack_id"] == stack_id
    assert body["payload"]["stack_name"] == "hooked"
    assert body["payload"]["tenant"] == mine
    assert (body["payload"]["action"], body["payload"]["status"]) == ("CREATE", "COMPLETE")

    # The POSTs were a worker's: its log has the failed attempts of this event.
    text = worker_logs(cluster)
    assert got.event_id in text, logs(cluster, api)

    log = http.get(f"/v1/{mine}/subscriptions/{sub['id']}/deliveries").json()["deliveries"]
    assert [(d["event_id"], d["attempts"], d["delivered_at"] is not None, d["last_error"])
            for d in log] == [(got.event_id, 3, True, "")]

    # Nothing for the other tenant's stack (complete by now), however long we wait.
    time.sleep(2.0)
    assert [json.loads(r.body)["payload"]["stack_id"] for r in receiver.requests] == \
        [stack_id] * 3


def test_the_api_processes_attempt_limit_reaches_the_worker(
        cluster: Cluster, receiver: Receiver) -> None:
    """With 2 attempts (the API's setting; the workers' own is 8) a delivery that failed twice
    is given up: the settings travel in the task."""
    mine = tenant()
    with run_api(cluster, f"hooks-2-{uuid.uuid4().hex[:6]}",
                 CONVERGENCE_WEBHOOK_BACKOFF_SECONDS="0.05",
                 CONVERGENCE_WEBHOOK_MAX_ATTEMPTS="2",
                 CONVERGENCE_WEBHOOK_ALLOWED_NETWORKS=LOOPBACK) as two, \
            httpx.Client(base_url=two.url, timeout=httpx.Timeout(20.0)) as c:
        sub = subscribe(c, receiver.url, tenant=mine, events=[END])
        create(c, mine, "given-up")

        def deliveries() -> list[dict[str, object]]:
            found: list[dict[str, object]] = \
                c.get(f"/v1/{mine}/subscriptions/{sub['id']}/deliveries").json()["deliveries"]
            return found

        try:
            wait_for(lambda: [d["attempts"] for d in deliveries()] == [2], WAIT_SECONDS)
        except AssertionError:
            pytest.fail(f"not given up after 2 attempts: {deliveries()}\n" + logs(cluster, two),
                        pytrace=False)
        time.sleep(3.0)  # the workers' own backoff (1s, 2s) would have tried again by now
        [d] = deliveries()
        assert (d["attempts"], d["delivered_at"], d["last_error"]) == (2, None, "HTTP 500")
        assert [r.status for r in receiver.requests] == [500, 500]
