"""The software-configuration agent's records in the simulated cloud's tables: its settings, the
servers it watches with the deployments each applied, the run log and the injected faults.

Callers: ``convergence_simcloud.agent`` records each poll and each application here and reads
the settings and the faults; ``convergence_simcloud.agent_control`` serves them under
``/_sim/agent`` (validating what it is sent with :func:`parse_settings` and :func:`parse_fault`,
which raise :class:`InvalidInput` naming the field); ``convergence_simcloud.client.SimControl``
reads them back as the dataclasses defined here. The settings are the cloud's ``Options``
(``agent_enabled``, ``agent_poll_interval``, ``agent_script_timeout``: given at each start,
not saved; ``agent_execute_scripts`` is shown but only the cloud's starter sets it); the
tables ``agent_servers`` (server id -> its name, the ids of the deployments it applied, how
often it polled and how the last poll went), ``agent_runs`` (sequence number -> one
application) and ``agent_faults`` (id -> fault) are saved with the state. Every function here
is called under the cloud's lock.
"""

from __future__ import annotations

import fnmatch
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from convergence_simcloud.state import Record, SimCloud, new_id

SERVERS = "agent_servers"
RUNS = "agent_runs"
FAULTS = "agent_faults"
RUNS_KEPT = 10_000  # the oldest runs go first


class InvalidInput(ValueError):
    """What the control API refuses with 400 (the message names the field)."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """How the agent behaves: the default seconds between a server's polls (a server's
    ``polling_interval`` wins), a script's time limit, whether it polls at all, and whether it
    executes scripts (read only: ``convergence simcloud --execute-scripts``)."""

    poll_interval: float
    script_timeout: float
    enabled: bool
    execute_scripts: bool = False


@dataclass(frozen=True, slots=True)
class AgentServer:
    """A server the agent watches: the deployments it applied, in order, and its polls."""

    server_id: str
    server_name: str
    applied: list[str] = field(default_factory=list)
    polls: int = 0
    last_poll_at: float | None = None  # wall time
    last_poll: str | None = None  # the metadata answer's status code, or the error's name


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One application of a deployment on a server (wall times, ``time.time()``)."""

    seq: int
    server_id: str
    server_name: str
    deployment_id: str
    name: str
    group: str
    action: str | None
    started_at: float
    finished_at: float
    status_code: int
    signalled: bool


@dataclass(frozen=True, slots=True)
class AgentFault:
    """A fault injected into the applications it matches (``config``: a glob on the
    deployment's name; ``server``: a glob on the server's name, or its exact id): ``delay``
    seconds before the result is reported, a forced ``status_code`` (the config is then not
    run) and ``stderr``; ``count`` applications, then it is spent (None: until removed)."""

    id: str
    config: str | None = None
    server: str | None = None
    delay: float = 0.0
    status_code: int | None = None
    stderr: str | None = None
    count: int | None = None
    hits: int = 0
    created_at: float = 0.0


# -- settings --------------------------------------------------------------------------------

def settings(cloud: SimCloud) -> AgentSettings:
    options = cloud.options
    return AgentSettings(options.agent_poll_interval, options.agent_script_timeout,
                         options.agent_enabled, options.agent_execute_scripts)


def _number(body: dict[str, Any], name: str) -> float:
    value = body[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidInput(f"{name}: must be a number > 0, not {value!r}")
    return float(value)


def parse_settings(body: Any) -> dict[str, Any]:
    """The settings a ``PUT /_sim/agent`` body changes (all checked before any is set)."""
    if not isinstance(body, dict):
        raise InvalidInput("the body must be a JSON object")
    if "execute_scripts" in body:
        raise InvalidInput("execute_scripts: only whoever starts the cloud sets it "
                           "(convergence simcloud --execute-scripts)")
    settable = ["enabled", "poll_interval", "script_timeout"]
    unknown = sorted(set(body) - set(settable))
    if unknown:
        raise InvalidInput(f"{unknown[0]}: unknown field; the settings are {settable}")
    changes: dict[str, Any] = {}
    for name in ("poll_interval", "script_timeout"):
        if name in body:
            changes[name] = _number(body, name)
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise InvalidInput(f"enabled: must be true or false, not {body['enabled']!r}")
        changes["enabled"] = body["enabled"]
    return changes


def change_settings(cloud: SimCloud, changes: dict[str, Any]) -> AgentSettings:
    for name, value in changes.items():
        setattr(cloud.options, f"agent_{name}", value)
    return settings(cloud)


# -- servers and what they applied -----------------------------------------------------------

def _table(cloud: SimCloud, name: str) -> dict[str, Record]:
    return cloud.tables.setdefault(name, {})  # type: ignore[no-any-return]


def watch(cloud: SimCloud, server_id: str, server_name: str) -> None:
    """Note a server the agent now watches (what it applied before is kept)."""
    row = _table(cloud, SERVERS).setdefault(server_id, asdict(AgentServer(server_id,
                                                                          server_name)))
    row["server_name"] = server_name


def forget(cloud: SimCloud, server_id: str) -> None:
    """A server gone: its agent and its record go with it (its runs stay in the log)."""
    _table(cloud, SERVERS).pop(server_id, None)


def servers(cloud: SimCloud) -> list[AgentServer]:
    return [AgentServer(**row) for row in _table(cloud, SERVERS).values()]


def applied(cloud: SimCloud, server_id: str) -> set[str]:
    row = _table(cloud, SERVERS).get(server_id)
    return set() if row is None else set(row.get("applied") or [])


def mark_applied(cloud: SimCloud, server_id: str, deployment_id: str) -> None:
    row = _table(cloud, SERVERS).get(server_id)
    if row is not None and deployment_id not in row["applied"]:
        row["applied"].append(deployment_id)


def note_poll(cloud: SimCloud, server_id: str, outcome: str) -> None:
    """Count a poll of the server's metadata and how it went (not worth a save alone)."""
    row = _table(cloud, SERVERS).get(server_id)
    if row is not None:
        row.update(polls=int(row.get("polls") or 0) + 1, last_poll_at=time.time(),
                   last_poll=outcome)


# -- the run log -----------------------------------------------------------------------------

def add_run(cloud: SimCloud, **fields: Any) -> AgentRun:
    """Log an application (the fields of :class:`AgentRun` but ``seq``, which is given)."""
    table = _table(cloud, RUNS)
    seq = max((int(key) for key in table), default=0) + 1
    run = AgentRun(seq=seq, **fields)
    table[str(seq)] = asdict(run)
    if len(table) > RUNS_KEPT + RUNS_KEPT // 10:
        for key in sorted(table, key=int)[:len(table) - RUNS_KEPT]:
            del table[key]
    return run


def runs(cloud: SimCloud, server: str | None = None, since: int = 0) -> list[AgentRun]:
    """The runs after sequence number ``since``, of the server of that id or name, if given."""
    found = [AgentRun(**row) for key, row in _table(cloud, RUNS).items() if int(key) > since]
    if server:
        found = [r for r in found if server in (r.server_id, r.server_name)]
    return sorted(found, key=lambda r: r.seq)


# -- faults ----------------------------------------------------------------------------------

_FAULT_FIELDS = ("config", "server", "delay", "status_code", "stderr", "count")


def parse_fault(body: Any) -> dict[str, Any]:
    """A fault's fields from the control API's JSON (:class:`InvalidInput` naming the field)."""
    if not isinstance(body, dict):
        raise InvalidInput("a fault is a JSON object")
    unknown = sorted(set(body) - set(_FAULT_FIELDS))
    if unknown:
        raise InvalidInput(f"{unknown[0]}: unknown field; a fault has {list(_FAULT_FIELDS)}")
    fields = {k: v for k, v in body.items() if v is not None}
    for name in ("config", "server", "stderr"):
        if name in fields and not isinstance(fields[name], str):
            raise InvalidInput(f"{name}: must be a string, not {fields[name]!r}")
    delay = fields.get("delay", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise InvalidInput(f"delay: must be a number of seconds >= 0, not {delay!r}")
    if "delay" in fields:
        fields["delay"] = float(delay)
    code = fields.get("status_code", 0)
    if isinstance(code, bool) or not isinstance(code, int):
        raise InvalidInput(f"status_code: must be an integer, not {code!r}")
    count = fields.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidInput(f"count: must be an integer >= 1, not {count!r}")
    return fields


def add_fault(cloud: SimCloud, fields: dict[str, Any]) -> AgentFault:
    fault = AgentFault(id=new_id(), created_at=time.time(), **fields)
    _table(cloud, FAULTS)[fault.id] = asdict(fault)
    return fault


def faults(cloud: SimCloud) -> list[AgentFault]:
    """The live faults, oldest first."""
    return sorted((AgentFault(**row) for row in _table(cloud, FAULTS).values()),
                  key=lambda f: (f.created_at, f.id))


def remove_fault(cloud: SimCloud, fault_id: str) -> bool:
    return _table(cloud, FAULTS).pop(fault_id, None) is not None


def _matches(fault: AgentFault, name: str, server_id: str, server_name: str) -> bool:
    if fault.config is not None and not fnmatch.fnmatchcase(name, fault.config):
        return False
    return fault.server is None or fault.server == server_id or \
        fnmatch.fnmatchcase(server_name, fault.server)


def take_fault(cloud: SimCloud, name: str, server_id: str,
               server_name: str) -> AgentFault | None:
    """The oldest fault matching the application of the deployment ``name`` on the server,
    counted as used (removed when spent)."""
    for fault in faults(cloud):
        if _matches(fault, name, server_id, server_name):
            table = _table(cloud, FAULTS)
            row = table[fault.id]
            row["hits"] = int(row.get("hits") or 0) + 1
            if fault.count is not None and row["hits"] >= fault.count:
                del table[fault.id]
            return fault
    return None
