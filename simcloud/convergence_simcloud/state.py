"""The simulated cloud's state: one thread-safe, in-memory object, optionally saved as JSON.

Callers: ``convergence_simcloud.app`` keeps one :class:`SimCloud` on the ASGI app; the service
modules (``identity``, Nova's, Neutron's, Cinder's and Glance's) read and change
it under :meth:`SimCloud.locked` and call :meth:`SimCloud.changed` after a change, which saves
the file (``--state FILE``) when one is set; ``convergence_simcloud.serve`` saves it once more
at shutdown. Time is the ``convergence_simcloud.clock.Clock`` it is given (tests pass a
``ManualClock`` and move it instead of sleeping). Identity lives in plain tables (domains,
users, projects, roles, assignments, application credentials, tokens); the other services keep
their objects in :attr:`SimCloud.objects` by kind (``"server"``, ``"network"``...), each a JSON
object with at least ``id`` and ``project_id``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convergence_simcloud.clock import Clock, SystemClock
from convergence_simcloud.journal import Journal
from convergence_simcloud.network_records import seed_objects as network_seed_objects
from convergence_simcloud.seed import (
    DEFAULT_DOMAIN,
    DEFAULT_DOMAIN_ID,
    Seed,
    service_objects,
)

Record = dict[str, Any]
VOLUME_SECONDS = {"create": 1.0, "attach": 0.5, "detach": 0.5, "delete": 0.5, "snapshot": 1.0}
TABLES = ("domains", "users", "projects", "roles", "assignments", "application_credentials",
          "trusts",
          "tokens", "objects", "fault_rules",
          "agent_servers", "agent_runs", "agent_faults")  # the agent's: agent_records


@dataclass
class Options:
    """How the cloud behaves (not saved: given at each start)."""

    token_lifetime: float = 3600.0  # seconds a token is valid
    build_seconds: float = 1.0  # how long a server stays in BUILD
    # per flavor (name or id): how long its servers stay in BUILD
    flavor_build_seconds: dict[str, float] = field(default_factory=dict)
    server_delete_seconds: float = 0.0  # how long a deleted server shows task_state deleting
    # Cinder: phase ("create", "attach", "detach", "delete", "snapshot") -> seconds
    volume_seconds: dict[str, float] = field(default_factory=lambda: dict(VOLUME_SECONDS))
    # per volume size (GiB): phase -> seconds, over ``volume_seconds``
    volume_size_seconds: dict[int, dict[str, float]] = field(default_factory=dict)
    region: str = "RegionOne"
    state_file: Path | None = None
    save_delay: float = 0.2  # seconds between a change and the save that includes it
    # the software-configuration agent (``convergence_simcloud.agent``); PUT /_sim/agent
    # changes these while the cloud runs
    agent_enabled: bool = True
    agent_poll_interval: float = 1.0  # seconds between polls (a server's own interval wins)
    agent_script_timeout: float = 600.0  # a script's time limit, seconds
    # Whether ``script`` configs are executed on this host (``convergence_simcloud.
    # agent_scripts``); off, their runs are simulated. Set only by whoever starts the cloud.
    agent_execute_scripts: bool = False
    agent_script_user: str = "nobody"  # who an executed script runs as when the cloud is root
    agent_output_limit: int = 1 << 20  # bytes kept of a script's stdout, stderr and outputs
    # When set, ``/_sim/`` answers only requests that carry it (``X-Sim-Control-Token``)
    control_token: str | None = None

    def server_build_seconds(self, flavor: Record | None) -> float:
        """How long a server of ``flavor`` (a flavor object) stays in BUILD."""
        for key in ("name", "id") if flavor else ():
            found = self.flavor_build_seconds.get(str(flavor.get(key)))  # type: ignore[union-attr]
            if found is not None:
                return found
        return self.build_seconds

    def volume_phase_seconds(self, phase: str, size: int) -> float:
        """How long a volume of ``size`` GiB takes for ``phase`` (create, attach...)."""
        by_size = self.volume_size_seconds.get(int(size), {})
        return float(by_size.get(phase, self.volume_seconds.get(phase, 0.0)))


def new_id() -> str:
    return uuid.uuid4().hex


class SimCloud:
    """All the cloud's state. Read and change it only under :meth:`locked`."""

    def __init__(self, seed: Seed | None = None, options: Options | None = None,
                 clock: Clock | None = None) -> None:
        self.options = options or Options()
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self.journal = Journal()  # the requests answered (not saved)
        # what brings clock-driven objects up to now before another service reads what they
        # touch (Nova's builds bind Neutron's ports); the app registers them, so a service
        # never imports the one whose objects it waits on
        self.settlers: list[Callable[[SimCloud], None]] = []
        self._save_lock = threading.Lock()
        self._saver: threading.Timer | None = None
        self.tables: dict[str, Any] = {name: {} for name in TABLES}
        self.tables["assignments"] = []
        if self.options.state_file is not None and self.options.state_file.exists():
            self._load(self.options.state_file)
        self.apply_seed(seed or Seed())

    # -- access ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[SimCloud]:
        with self._lock:
            yield self

    def settle(self) -> None:
        """Run the settlers: every clock-driven object up to now. Under the lock."""
        for settler in self.settlers:
            settler(self)

    def table(self, name: str) -> dict[str, Record]:
        found: dict[str, Record] = self.tables[name]
        return found

    @property
    def objects(self) -> dict[str, dict[str, Record]]:
        """The services' objects: kind -> id -> object."""
        found: dict[str, dict[str, Record]] = self.tables["objects"]
        return found

    def kind(self, kind: str) -> dict[str, Record]:
        return self.objects.setdefault(kind, {})

    def now(self) -> float:
        return self.clock.now()

    # -- identity lookups --------------------------------------------------------------------

    def find(self, table: str, *, name: str | None = None, id: str | None = None,
             domain_id: str | None = None) -> Record | None:
        rows = self.table(table)
        if id is not None:
            return rows.get(id)
        for row in rows.values():
            if row.get("name") == name and (domain_id is None or
                                             row.get("domain_id", domain_id) == domain_id):
                return row
        return None

    def domain_id(self, ref: dict[str, Any] | None) -> str | None:
        """The id of the domain ``{"id": ...}`` or ``{"name": ...}`` names (None: unknown)."""
        if not ref:
            return DEFAULT_DOMAIN_ID
        found = self.find("domains", id=ref.get("id"), name=ref.get("name"))
        return None if found is None else str(found["id"])

    def roles_of(self, user_id: str, project_id: str) -> list[Record]:
        ids = [a["role_id"] for a in self.tables["assignments"]
               if a["user_id"] == user_id and a["project_id"] == project_id]
        return [self.table("roles")[i] for i in ids if i in self.table("roles")]

    def projects_of(self, user_id: str) -> list[Record]:
        ids = {a["project_id"] for a in self.tables["assignments"] if a["user_id"] == user_id}
        return [p for i, p in self.table("projects").items() if i in ids]

    # -- seeding -----------------------------------------------------------------------------

    def apply_seed(self, seed: Seed) -> None:
        """Add what the seed names and the state lacks (matched by name)."""
        with self._lock:
            domains = self.table("domains")
            domains.setdefault(DEFAULT_DOMAIN_ID, {"id": DEFAULT_DOMAIN_ID,
                                                   "name": DEFAULT_DOMAIN, "enabled": True})
            for role in seed.roles:
                if self.find("roles", name=role) is None:
                    rid = new_id()
                    self.table("roles")[rid] = {"id": rid, "name": role, "domain_id": None}
            for project in seed.projects:
                self._ensure_project(project)
            for user in seed.users:
                self._ensure_user(user.name, user.password, user.projects, user.id)
            for cred in seed.application_credentials:
                self._ensure_app_credential(cred.name, cred.secret, cred.user, cred.project,
                                            cred.id, cred.roles)
            for kind, record in service_objects(
                    seed, lambda name: str(self._ensure_project(name)["id"])):
                self.kind(kind).setdefault(str(record["id"]), record)  # kept if saved
            for kind, record in network_seed_objects(
                    seed, lambda name: str(self._ensure_project(name)["id"]), self.now()):
                self.kind(kind).setdefault(str(record["id"]), record)  # kept if saved
        self.changed()

    def _ensure_project(self, name: str) -> Record:
        found = self.find("projects", name=name, domain_id=DEFAULT_DOMAIN_ID)
        if found is None:
            pid = new_id()
            found = {"id": pid, "name": name, "domain_id": DEFAULT_DOMAIN_ID,
                     "description": "", "enabled": True, "is_domain": False,
                     "parent_id": DEFAULT_DOMAIN_ID, "tags": []}
            self.table("projects")[pid] = found
        return found

    def _ensure_user(self, name: str, password: str, projects: dict[str, list[str]],
                     user_id: str | None) -> None:
        user = self.find("users", name=name, domain_id=DEFAULT_DOMAIN_ID)
        if user is None:
            uid = user_id or new_id()
            default = next(iter(projects), None)
            user = {"id": uid, "name": name, "domain_id": DEFAULT_DOMAIN_ID, "enabled": True,
                    "password": password, "password_expires_at": None,
                    "default_project_id": (self._ensure_project(default)["id"]
                                           if default else None)}
            self.table("users")[uid] = user
        for project_name, role_names in projects.items():
            project = self._ensure_project(project_name)
            for role_name in role_names:
                role = self.find("roles", name=role_name)
                if role is None:
                    continue
                row = {"user_id": user["id"], "project_id": project["id"],
                       "role_id": role["id"]}
                if row not in self.tables["assignments"]:
                    self.tables["assignments"].append(row)

    def _ensure_app_credential(self, name: str, secret: str, user_name: str, project_name: str,
                               cred_id: str | None, roles: list[str] | None) -> None:
        user = self.find("users", name=user_name, domain_id=DEFAULT_DOMAIN_ID)
        project = self.find("projects", name=project_name, domain_id=DEFAULT_DOMAIN_ID)
        if user is None or project is None:
            raise ValueError(f"application credential {name!r}: no user {user_name!r} or "
                             f"project {project_name!r}")
        existing = [c for c in self.table("application_credentials").values()
                    if c["name"] == name and c["user_id"] == user["id"]]
        if existing:
            return
        granted = [r["id"] for r in self.roles_of(user["id"], project["id"])
                   if roles is None or r["name"] in roles]
        cid = cred_id or new_id()
        self.table("application_credentials")[cid] = {
            "id": cid, "name": name, "secret": secret, "user_id": user["id"],
            "project_id": project["id"], "role_ids": granted, "expires_at": None,
            "unrestricted": False, "description": None}

    # -- persistence -------------------------------------------------------------------------

    def changed(self) -> None:
        """Say the state changed: when there is a state file, it is saved within
        ``Options.save_delay`` seconds (one write for all the changes of that interval, so a
        busy cloud does not rewrite its whole file on every request), and at shutdown."""
        if self.options.state_file is None:
            return
        if self.options.save_delay <= 0:
            self.save()
            return
        with self._save_lock:
            if self._saver is not None:
                return  # a save is already due and will include this change
            self._saver = threading.Timer(self.options.save_delay, self._save_due)
            self._saver.daemon = True
            self._saver.start()

    def _save_due(self) -> None:
        with self._save_lock:
            self._saver = None
        self.save()

    def save(self) -> None:
        """Write the state file now (a save that was due is then not needed). A folder that
        is gone (a throwaway one removed while a save was due) keeps nothing: skipped."""
        path = self.options.state_file
        if path is None:
            return
        with self._save_lock:
            if self._saver is not None:
                self._saver.cancel()
                self._saver = None
        with self._lock:  # held while writing: concurrent saves never share the temporary file
            if not path.parent.is_dir():
                return
            text = json.dumps({"version": 1, "tables": self.tables}, sort_keys=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)

    def _load(self, path: Path) -> None:
        data = json.loads(path.read_text())
        for name in TABLES:
            if name in data.get("tables", {}):
                self.tables[name] = data["tables"][name]
