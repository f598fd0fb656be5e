"""The simulated cloud's software-configuration agent: os-collect-config and the heat-config
hooks of every ACTIVE server that asks for them, so that Heat software deployments run end to
end against the simulated cloud.

Callers: ``convergence_simcloud.serve`` makes one :class:`Agent` per served cloud, starts it
once the cloud listens and stops it (no thread left behind) before the cloud stops, in the
``convergence simcloud`` process and in-process (``running``) alike. A server asks for an agent
through the ``os-collect-config.json`` part of its user_data (``convergence_simcloud.
agent_config``). One scheduler thread keeps a heap of next-poll times; a small pool of worker
threads polls: ``GET metadata_url`` (pre-signed, no token), then each deployment listed whose
id the server has not applied yet, in order and one at a time, is applied
(``convergence_simcloud.agent_hooks``, after the faults of ``agent_records``) and signalled
back to ``deploy_signal_id`` with ``deploy_signal_verb``; only a signal that arrived (or none
wanted: ``NO_SIGNAL``, no signal id; or one refused with a 4xx, which is final) marks the id
applied, so a signal given up on after a few tries is applied again at the next poll. Polls and
signals share one pooled HTTP client. A ``script`` config is executed only when whoever started
the cloud asked for it (``Options.agent_execute_scripts``: ``convergence_simcloud.
agent_scripts``, confined, as an unprivileged account when this process is root); otherwise
its run is simulated (``agent_hooks.simulate``). Polls keep wall time (a server's state
follows the cloud's clock, which tests may move by hand). Everything it does is recorded in
the cloud's tables (``agent_records``), which ``/_sim/agent`` serves. Logs name servers by id
and deployments by name: the URLs, which carry credentials, are never logged.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import httpx

from convergence_simcloud import agent_hooks as hooks
from convergence_simcloud import agent_records as records
from convergence_simcloud import agent_scripts as scripts
from convergence_simcloud.agent_config import AgentConfig, agent_config
from convergence_simcloud.agent_workers import Workers
from convergence_simcloud.servers import KIND, advance
from convergence_simcloud.state import SimCloud

logger = logging.getLogger(__name__)

WORKERS = 16  # threads polling and applying at most (one server uses one at a time)
METADATA_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
SIGNAL_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
SIGNAL_ATTEMPTS = 4  # a signal failing with a 5xx or no connection: tried again, so often
SIGNAL_BACKOFF = 0.1  # seconds before the first retry, doubled before each next one

# How a signal went.
SIGNALLED = "signalled"  # answered 2xx
UNWANTED = "unwanted"  # NO_SIGNAL, or nowhere to send it
REFUSED = "refused"  # answered otherwise (a 4xx): final
FAILED = "failed"  # no answer or a 5xx, however often tried: the deployment is applied again


@dataclass(eq=False)
class _Watch:
    """A server with an agent: the user_data its config was read from."""

    server_id: str
    user_data: str
    config: AgentConfig


@dataclass(frozen=True)
class _View:
    """What a poll needs of its server, read under the lock."""

    name: str
    active: bool
    applied: set[str]


class Agent:
    """The agents of all the servers of ``cloud`` that ask for one."""

    def __init__(self, cloud: SimCloud, workers: int = WORKERS) -> None:
        self.cloud = cloud
        self.processes = scripts.Processes()
        self._workers = Workers(workers, "simcloud-agent")
        self._stopping = threading.Event()
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int, _Watch]] = []  # (due, order, watch): one per watch
        self._order = itertools.count()
        self._watches: dict[str, _Watch] = {}  # the scheduler thread's own
        self._no_agent: dict[str, str] = {}  # server id -> user_data that asks for no agent
        self._thread: threading.Thread | None = None
        self._lazy = threading.Lock()
        self._client: httpx.Client | None = None
        # (the name, the account executed scripts run as): resolved now, so that a bad one
        # fails the start
        self._account: tuple[str, scripts.Account | None] | None = None
        self._limits()

    # -- life --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="simcloud-agent-scheduler",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling, kill the scripts running, wait for the threads; idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping.set()
        with self._wake:
            self._wake.notify_all()
        self.processes.kill_all()
        thread.join()
        self._workers.shutdown()
        with self._lazy:
            if self._client is not None:
                self._client.close()
        logger.debug("agent: stopped")

    def _limits(self) -> scripts.Limits | None:
        """How scripts are executed now (None: they are not, their runs are simulated)."""
        options = self.cloud.options
        if not options.agent_execute_scripts:
            return None
        user = options.agent_script_user
        with self._lazy:
            if self._account is None or self._account[0] != user:
                self._account = (user, scripts.run_as(user))
            account = self._account[1]
        return scripts.Limits(options.agent_script_timeout, options.agent_output_limit,
                              account)

    def _http(self) -> httpx.Client:
        """The HTTP client all polls and signals share (its connections pooled)."""
        with self._lazy:
            if self._client is None:
                self._client = httpx.Client(
                    trust_env=False, follow_redirects=False, timeout=METADATA_TIMEOUT,
                    limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))
            return self._client

    # -- the scheduler -----------------------------------------------------------------------

    def _run(self) -> None:
        next_scan = 0.0
        while not self._stopping.is_set():
            try:
                if time.monotonic() >= next_scan:
                    self._scan()
                    interval = self.cloud.options.agent_poll_interval
                    next_scan = time.monotonic() + min(max(interval, 0.05), 1.0)
                self._dispatch(time.monotonic())
                with self._wake:
                    due = min(next_scan, self._heap[0][0]) if self._heap else next_scan
                    if not self._stopping.is_set():
                        self._wake.wait(max(0.0, due - time.monotonic()))
            except Exception:
                logger.exception("agent: a scheduling round failed")
                self._stopping.wait(1.0)

    def _interval(self, watch: _Watch) -> float:
        return watch.config.polling_interval or self.cloud.options.agent_poll_interval

    def _schedule(self, watch: _Watch, due: float) -> None:
        with self._wake:
            heapq.heappush(self._heap, (due, next(self._order), watch))
            self._wake.notify()

    def _dispatch(self, now: float) -> None:
        """Hand the servers due to the workers (when the agent is disabled, skip a turn)."""
        ready = []
        with self._wake:
            while self._heap and self._heap[0][0] <= now:
                ready.append(heapq.heappop(self._heap)[2])
        enabled = self.cloud.options.agent_enabled
        for watch in ready:
            if self._watches.get(watch.server_id) is not watch:
                continue  # its server is gone, or asks for no agent any more
            if enabled:
                self._workers.submit(functools.partial(self._poll, watch))
            else:
                self._schedule(watch, now + self._interval(watch))

    def _scan(self) -> None:
        """Watch the servers that ask for an agent; forget those gone."""
        cloud, new = self.cloud, []
        with cloud.locked():
            servers = cloud.kind(KIND)
            for server_id in [s for s in self._watches if s not in servers]:
                del self._watches[server_id]
                records.forget(cloud, server_id)
                logger.info("agent: server %s is gone: its agent stops", server_id)
            for server_id in [s for s in self._no_agent if s not in servers]:
                del self._no_agent[server_id]
            for server_id, server in servers.items():
                found = server.get("user_data")
                user_data = found if isinstance(found, str) else ""
                watch = self._watches.get(server_id)
                if watch is None and (not user_data or self._no_agent.get(server_id)
                                      == user_data):
                    continue
                if watch is not None and watch.user_data == user_data:
                    continue
                config = agent_config(user_data)
                if config is None:
                    self._no_agent[server_id] = user_data
                    if watch is not None:
                        del self._watches[server_id]
                        records.forget(cloud, server_id)
                    continue
                if watch is not None:  # new user_data (a rebuild): the same agent, re-read
                    watch.user_data, watch.config = user_data, config
                    continue
                self._watches[server_id] = _Watch(server_id, user_data, config)
                records.watch(cloud, server_id, str(server.get("name") or ""))
                new.append(self._watches[server_id])
        for watch in new:
            logger.info("agent: server %s has an agent", watch.server_id)
            self._schedule(watch, time.monotonic())
        if new:
            cloud.changed()

    # -- a poll ------------------------------------------------------------------------------

    def _poll(self, watch: _Watch) -> None:
        keep = True
        try:
            keep = self._poll_once(watch)
        except Exception:
            if not self._stopping.is_set():
                logger.exception("agent: server %s: a poll failed", watch.server_id)
        finally:
            if keep and not self._stopping.is_set():
                self._schedule(watch, time.monotonic() + self._interval(watch))

    def _view(self, server_id: str) -> _View | None:
        """The server as a poll sees it, brought up to the clock (None: it is gone)."""
        cloud = self.cloud
        with cloud.locked():
            server = cloud.kind(KIND).get(server_id)
            if server is None or not advance(cloud, server):
                return None
            active = server.get("status") == "ACTIVE" and \
                server.get("OS-EXT-STS:task_state") != "deleting"
            return _View(str(server.get("name") or ""), active,
                         records.applied(cloud, server_id))

    def _poll_once(self, watch: _Watch) -> bool:
        """Poll the server's metadata and apply what is new; False when the server is gone."""
        server_id = watch.server_id
        view = self._view(server_id)
        if view is None:
            return False
        if not view.active:
            return True
        deployments = self._fetch(server_id, watch.config.metadata_url)
        for deployment in deployments or []:
            if self._stopping.is_set():
                return False
            raw_id = deployment.get("id") if isinstance(deployment, dict) else None
            if not isinstance(raw_id, str | int) or isinstance(raw_id, bool) or raw_id == "":
                logger.debug("agent: server %s: a deployment without an id is ignored",
                             server_id)
                continue
            if str(raw_id) in view.applied:
                continue
            done = self._apply(server_id, view.name, deployment)
            if done is None:
                return False
            if not done:
                break  # the rest wait: they are applied in order, at the next poll
            view.applied.add(str(raw_id))
        return True

    def _fetch(self, server_id: str, url: str) -> list[Any] | None:
        """The deployments the metadata lists (None: no answer to use, try at the next poll)."""
        try:
            answer = self._http().get(url, timeout=METADATA_TIMEOUT)
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            outcome = type(error).__name__
        else:
            outcome = str(answer.status_code)
        with self.cloud.locked():
            records.note_poll(self.cloud, server_id, outcome)
        if outcome != "200":
            logger.debug("agent: server %s: the metadata poll answered %s", server_id, outcome)
            return None
        try:
            body = answer.json()
        except ValueError:
            body = None
        deployments = body.get("deployments") if isinstance(body, dict) else None
        if not isinstance(deployments, list):
            logger.debug("agent: server %s: the metadata lists no deployments", server_id)
            return None
        return deployments

    # -- applying and signalling -------------------------------------------------------------

    def _apply(self, server_id: str, server_name: str,
               deployment: dict[str, Any]) -> bool | None:
        """Apply one deployment, signal it and log the run: whether it is done (applied and
        its signal delivered or not wanted); None when the server went away meanwhile."""
        cloud = self.cloud
        deployment_id = str(deployment["id"])
        name = hooks.deployment_name(deployment)
        group = str(deployment.get("group") or "Heat::Ungrouped")
        inputs = hooks.inputs_of(deployment)
        started = time.time()
        with cloud.locked():
            fault = records.take_fault(cloud, name, server_id, server_name)
        if fault is not None:
            cloud.changed()
        logger.info("agent: server %s applies %s (group %s)", server_id, name, group)
        try:
            result = self._result(deployment, inputs, fault)
        except hooks.Stopped:
            return False
        if fault is not None and fault.delay > 0:
            self._stopping.wait(fault.delay)
        if self._stopping.is_set():
            return False
        with cloud.locked():
            if server_id not in cloud.kind(KIND):
                return None
        outcome = self._signal(server_id, name, inputs, result)
        action = inputs.get("deploy_action")
        with cloud.locked():
            records.add_run(cloud, server_id=server_id, server_name=server_name,
                            deployment_id=deployment_id, name=name, group=group,
                            action=action if isinstance(action, str) else None,
                            started_at=started, finished_at=time.time(),
                            status_code=result.status_code, signalled=outcome == SIGNALLED)
            if outcome != FAILED:
                records.mark_applied(cloud, server_id, deployment_id)
        cloud.changed()
        return outcome != FAILED

    def _result(self, deployment: dict[str, Any], inputs: dict[str, Any],
                fault: records.AgentFault | None) -> hooks.Result:
        """What applying the deployment gives: a fault's, a script executed (when the cloud
        executes scripts) or simulated, or another group's no-op."""
        if fault is not None and fault.status_code is not None:
            stderr = fault.stderr if fault.stderr is not None else \
                f"simulated failure (agent fault {fault.id})\n"
            return hooks.Result("", stderr, fault.status_code)
        if deployment.get("group") != hooks.SCRIPT:
            result = hooks.no_op(deployment, inputs)
        else:
            try:
                limits = self._limits()
                result = hooks.simulate(deployment, inputs) if limits is None else \
                    scripts.run_script(deployment, inputs, limits, self.processes)
            except (OSError, ValueError) as error:  # ValueError: the account is gone
                result = hooks.Result("", f"the agent could not run the config: {error}\n",
                                      hooks.CANNOT_EXECUTE)
        if fault is not None and fault.stderr is not None:
            result = replace(result, stderr=fault.stderr)
        return result

    def _signal(self, server_id: str, name: str, inputs: dict[str, Any],
                result: hooks.Result) -> str:
        """Send the result where the inputs say; how it went (:data:`SIGNALLED`...)."""
        transport = str(inputs.get("deploy_signal_transport") or "").upper()
        url = inputs.get("deploy_signal_id")
        if transport == "NO_SIGNAL":
            return UNWANTED
        if not isinstance(url, str) or not url:
            logger.info("agent: server %s: %s has no signal id (transport %s): not signalled",
                        server_id, name, transport or "unset")
            return UNWANTED
        verb = str(inputs.get("deploy_signal_verb") or "POST").upper()
        verb = verb if verb in ("POST", "PUT") else "POST"
        content = json.dumps(result.signal_body(), default=str).encode()
        for attempt in range(SIGNAL_ATTEMPTS):
            if attempt and self._stopping.wait(SIGNAL_BACKOFF * 2 ** (attempt - 1)):
                return FAILED
            try:
                answer = self._http().request(verb, url, content=content,
                                              headers={"Content-Type": "application/json"},
                                              timeout=SIGNAL_TIMEOUT)
            except httpx.InvalidURL:
                logger.info("agent: server %s: %s's signal id is not a URL", server_id, name)
                return REFUSED
            except httpx.HTTPError as error:
                logger.debug("agent: server %s: signalling %s failed (%s)", server_id, name,
                             type(error).__name__)
                continue
            if answer.is_success:
                logger.info("agent: server %s: %s signalled (status code %d)", server_id,
                            name, result.status_code)
                return SIGNALLED
            if answer.status_code < 500:
                logger.info("agent: server %s: the signal of %s was refused (%d): it is not "
                            "sent again", server_id, name, answer.status_code)
                return REFUSED
            logger.debug("agent: server %s: signalling %s answered %d", server_id, name,
                          answer.status_code)
        logger.info("agent: server %s: %s could not be signalled: applied again at the next "
                    "poll", server_id, name)
        return FAILED
