"""A small typed client of the simulated cloud's control plane (``/_sim/``), for tests, demos
and benchmarks.

Callers: tests and ``benchmarks/`` make a :class:`SimControl` from the cloud's base URL (what
``convergence simcloud`` prints, or the URL ``convergence_simcloud.serve.running`` yields) and
add fault rules (:meth:`SimControl.add_rule` with the fields of
``convergence_simcloud.faults.Rule``), list and remove them, and read the request journal to
count the cloud calls an operation made; the ``agent_*`` methods read and change the
software-configuration agent's settings (:meth:`SimControl.set_agent`), read its run log
(:meth:`SimControl.agent_runs`) and inject its faults (:meth:`SimControl.add_agent_fault`). It
speaks plain HTTP with the standard library, so it needs nothing the engine's processes do not
already have; a refused request raises :class:`ControlError` with the server's message. A
cloud served off loopback has a control token (``convergence_simcloud.control_auth``): give it
as ``token``, and every request carries it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from convergence_simcloud.agent_records import AgentFault, AgentRun, AgentServer, AgentSettings
from convergence_simcloud.control_auth import HEADER
from convergence_simcloud.faults import Rule
from convergence_simcloud.journal import Entry


class ControlError(RuntimeError):
    """The control plane refused a request (``status`` and its message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class SimControl:
    """The control plane of the simulated cloud at ``url`` (``http://host:port``); ``token``:
    its control token, if it has one."""

    def __init__(self, url: str, timeout: float = 10.0, token: str | None = None) -> None:
        self.url = url.rstrip("/") + "/_sim"
        self.timeout = timeout
        self.token = token

    def _call(self, method: str, path: str, body: Any = None,
              query: dict[str, Any] | None = None) -> Any:
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items()
                                                 if v is not None})
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers[HEADER] = self.token
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            try:
                message = json.loads(text)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = text
            raise ControlError(error.code, message) from None
        return json.loads(raw) if raw else None

    # -- rules -----------------------------------------------------------------------------

    def add_rule(self, effect: str, **match: Any) -> Rule:
        """Add a rule: ``effect`` (see ``faults.EFFECTS``) and its match and parameters
        (``service``, ``kind``, ``name``, ``metadata``, ``tag``, ``object_id``, ``project_id``,
        ``method``, ``path``, ``seconds``, ``message``, ``count``)."""
        found = self._call("POST", "/rules", {"rule": {"effect": effect, **match}})
        return Rule(**found["rule"])

    def rules(self) -> list[Rule]:
        return [Rule(**r) for r in self._call("GET", "/rules")["rules"]]

    def rule(self, rule_id: str) -> Rule:
        return Rule(**self._call("GET", f"/rules/{rule_id}")["rule"])

    def remove_rule(self, rule_id: str) -> None:
        self._call("DELETE", f"/rules/{rule_id}")

    def clear_rules(self) -> None:
        self._call("DELETE", "/rules")

    # -- journal ---------------------------------------------------------------------------

    def journal(self, since: int = 0, *, service: str | None = None,
                method: str | None = None, project_id: str | None = None,
                path: str | None = None) -> list[Entry]:
        """The requests answered after sequence number ``since``, optionally filtered."""
        found = self._call("GET", "/journal", query={
            "since": since, "service": service, "method": method, "project_id": project_id,
            "path": path})
        return [Entry(**e) for e in found["entries"]]

    def last(self) -> int:
        """The sequence number of the last request journaled (note it before an operation)."""
        return int(self._call("GET", "/journal", query={"since": 1 << 62})["last"])

    def clear_journal(self) -> None:
        self._call("DELETE", "/journal")

    def objects(self) -> dict[str, int]:
        """How many objects of each kind the cloud holds."""
        return dict(self._call("GET", "/objects")["objects"])

    # -- the software-configuration agent ----------------------------------------------------

    def agent_settings(self) -> AgentSettings:
        return AgentSettings(**self._call("GET", "/agent"))

    def set_agent(self, *, poll_interval: float | None = None,
                  script_timeout: float | None = None,
                  enabled: bool | None = None) -> AgentSettings:
        """Change the agent's settings (those given); the settings now."""
        changes = {"poll_interval": poll_interval, "script_timeout": script_timeout,
                   "enabled": enabled}
        return AgentSettings(**self._call("PUT", "/agent", {
            k: v for k, v in changes.items() if v is not None}))

    def agent_servers(self) -> list[AgentServer]:
        """The servers with an agent, each with the ids of the deployments it applied."""
        return [AgentServer(**s) for s in self._call("GET", "/agent/servers")["servers"]]

    def agent_runs(self, server: str | None = None, since: int = 0) -> list[AgentRun]:
        """The applications after sequence number ``since`` (of a server: id or name)."""
        found = self._call("GET", "/agent/runs", query={"server": server, "since": since})
        return [AgentRun(**r) for r in found["runs"]]

    def add_agent_fault(self, *, config: str | None = None, server: str | None = None,
                        delay: float | None = None, status_code: int | None = None,
                        stderr: str | None = None, count: int | None = None) -> AgentFault:
        """Inject a fault into the applications of the deployments named like ``config`` (a
        glob) on the servers named like ``server`` (a glob, or an id): a ``delay`` before the
        result is reported, a forced ``status_code`` and ``stderr``; ``count`` times."""
        fields = {"config": config, "server": server, "delay": delay,
                  "status_code": status_code, "stderr": stderr, "count": count}
        return AgentFault(**self._call("POST", "/agent/faults", {
            k: v for k, v in fields.items() if v is not None}))

    def agent_faults(self) -> list[AgentFault]:
        return [AgentFault(**f) for f in self._call("GET", "/agent/faults")["faults"]]

    def remove_agent_fault(self, fault_id: str) -> None:
        self._call("DELETE", f"/agent/faults/{fault_id}")
