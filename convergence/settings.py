"""Settings: one frozen value, built once per entry point from the environment, passed down.

Callers: :func:`load_settings` runs in the entry points only: the CLI (``convergence.cli.state``,
and the ``api``, ``worker`` and ``db`` commands), ``workers/celery_worker.py`` and Alembic's
``store/migrations/env.py``; the runtime, the dispatchers, the worker's life, the API and the
use cases take the :class:`Settings` they are handed. Nothing else reads ``CONVERGENCE_*`` but
the CLI's own ``CONVERGENCE_URL``, ``CONVERGENCE_PROJECT_ID`` and ``CONVERGENCE_TOKEN``
(``convergence.cli``) and the plugins, which read their own variables once, as the runtime
builds their backends (``PluginHost.environ`` in ``convergence.plugins.base``; e.g.
``CONVERGENCE_TEST_BACKEND_LATENCY``).

``CONVERGENCE_DATABASE_URL``  SQLAlchemy URL; default: a SQLite file in the user data directory
``CONVERGENCE_BROKER_URL``    Celery broker (Redis); unset: the in-process dispatcher runs steps
``CONVERGENCE_DATA_DIR``      where the embedded database lives
``CONVERGENCE_LEASE_SECONDS`` how long a claimed resource stays claimed without renewal (and, in
                              embedded mode, the stack a command drives: ``services.holds``)
``CONVERGENCE_SWEEP_SECONDS`` the sweeper's period
``CONVERGENCE_HEARTBEAT_SECONDS`` heartbeat period of the processes that run steps
                              (``convergence.workers.heartbeat``)
``CONVERGENCE_POLL_SECONDS``  longest wait between two polls of a pending operation
``CONVERGENCE_SHUTDOWN_GRACE_SECONDS`` how long a worker told to stop (SIGTERM) lets the steps in
                              hand reach their commit point before it lets go of their leases;
                              and how long ``convergence api`` lets requests in flight finish
``CONVERGENCE_BATCH_SIZE``    how many ready nodes of one traversal a message carries
``CONVERGENCE_INLINE_SECONDS`` how long a step goes on with the successors it released
``CONVERGENCE_MAX_REQUEST_BYTES`` largest API request body (default 2 MiB; larger: 413), and the
                              most a stack's template, files, environments and parameters may
                              weigh together, however they come (``services.admission``)
``CONVERGENCE_MAX_TEMPLATE_BYTES`` largest template, file of the files map or environment
                              (default 1 MiB), through the API (413) and the CLI alike
``CONVERGENCE_AUTH``          API authentication: noauth (default), token or keystone
``CONVERGENCE_ALLOW_NOAUTH``  true: ``convergence api`` may serve noauth on an address other than
                              loopback (as ``--allow-noauth``); default false
``CONVERGENCE_TOKENS_FILE``   token mode: YAML/JSON mapping token -> {project, roles}
``CONVERGENCE_POLICY_FILE``   the API's policy: a Heat policy.yaml/json whose rules override the
                              defaults (Heat's; ``convergence.api.policies``); unset: the defaults
``CONVERGENCE_PROJECT_CLOUDS`` token mode: ``project=cloud,...``, the ``clouds.yaml`` entries
                              each project's stacks reach (the first its default); a project
                              with none reaches no cloud (``convergence.services.credentials``)
``CONVERGENCE_STACK_CLOUDS``  noauth and keystone modes: clouds a request may name besides
                              the default one (an admin may name any)
``CONVERGENCE_KEYSTONE_URL``  keystone mode: the Keystone endpoint (``/v3`` is added)
``CONVERGENCE_KEYSTONE_SERVICE_TOKEN`` keystone mode: this service's token, to validate others
``CONVERGENCE_WEBHOOK_BACKOFF_SECONDS`` webhooks: first retry delay (doubles); default 1
``CONVERGENCE_WEBHOOK_MAX_ATTEMPTS`` webhooks: attempts before a delivery is given up; default 8
``CONVERGENCE_WEBHOOK_ALLOWED_NETWORKS`` webhooks: comma-separated CIDRs the operator trusts
                              deliveries to reach although they are loopback, private,
                              link-local or otherwise not global (e.g. 10.20.0.0/16); default
                              none (``services.webhook_destinations``)
``CONVERGENCE_MAX_SUBSCRIPTIONS_PER_TENANT`` webhooks: the most subscriptions a tenant may
                              hold (default 100; 0: no limit)
``CONVERGENCE_PUBLIC_URL``    the API's address as servers and alarms reach it: every signal URL
                              names it (default http://127.0.0.1:8004; ``convergence api``: the
                              address it serves on)
``CONVERGENCE_SIGNING_KEY``   what signed URLs are signed with (a secret); unset: a key the
                              engine makes once and keeps, encrypted, in its database
``CONVERGENCE_SIGNED_URL_SECONDS`` how long a signed URL is good for after the resource version
                              it names (a deployment's: its derived config) was made; past it,
                              404 (``services.signals``); unset or 0 (the default): no expiry,
                              as Heat's
``CONVERGENCE_ENCRYPTION_KEYS`` Fernet keys, comma-separated, newest first, that the secrets
                              stored in the database are encrypted with (hidden parameters,
                              private keys, passwords, webhook secrets, the signing key): the
                              first encrypts, every one decrypts (``convergence.store.sealing``).
                              Unset: an embedded SQLite database uses a key made once and kept
                              beside it (``<database>.key``, mode 0600); any other database is
                              refused. ``convergence admin make-key`` makes one
``CONVERGENCE_STATS_DIR``     a worker writes its figures there for the benchmarks
                              (``convergence.workers.stats``); unset (the default): off
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import platformdirs

_PREFIX = "CONVERGENCE_"

DEFAULT_MAX_REQUEST_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_TEMPLATE_BYTES = 1024 * 1024
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8004"  # the API's default address


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str
    broker_url: str | None = None
    lease_seconds: float = 30.0
    sweep_seconds: float = 5.0
    batch_size: int = 200
    poll_seconds: float = 1.0  # longest wait between two polls of a pending operation
    # Heat's action_retry_limit: how many times a create that failed in the cloud (a server
    # in ERROR) is tried again, each time by replacing what failed.
    action_retry_limit: int = 5
    # Nested stacks: how deep a tree of them may go (a top-level stack is at depth 0), and
    # how many resources a whole tree may hold (0: no limit).
    max_nested_depth: int = 5
    max_tree_resources: int = 0
    # The observer (convergence.engine.observer): each stack opted in is looked at once per
    # this many seconds (None: no observer), at most ``observe_per_pass`` resources a pass.
    observe_seconds: float | None = None
    observe_per_pass: int = 100
    # How long a step may go on with the successors it released before handing them over.
    inline_seconds: float = 0.5
    worker_id: str = ""
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_template_bytes: int = DEFAULT_MAX_TEMPLATE_BYTES
    auth: str = "noauth"  # noauth | token | keystone (convergence.api.auth)
    # noauth on an address other than loopback: refused by ``convergence api`` unless true.
    allow_noauth: bool = False
    tokens_file: str | None = None
    # The API's policy file (Heat's rules, convergence.api.policy); None: the defaults.
    policy_file: str | None = None
    keystone_url: str | None = None
    keystone_service_token: str | None = field(default=None, repr=False)  # a secret
    # The clouds (``clouds.yaml`` entries) any API caller may put a stack in besides the
    # engine's own; an admin may name any. The CLI's embedded mode is the operator's: any.
    stack_clouds: tuple[str, ...] = ()
    # Token mode: the clouds (``clouds.yaml`` entries) of each project, its first the one its
    # stacks use unless they name another of them; a project with none reaches no cloud.
    project_clouds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Notification webhooks (convergence.services.webhooks): first retry after this many seconds,
    # doubling each time, and how many attempts before giving up.
    webhook_backoff_seconds: float = 1.0
    webhook_max_attempts: int = 8
    # Networks (CIDRs) deliveries may reach although they are not global (loopback, private,
    # link-local...: convergence.services.webhook_destinations), and how many subscriptions
    # a tenant may hold (0: no limit).
    webhook_allowed_networks: tuple[str, ...] = ()
    max_subscriptions_per_tenant: int = 100
    # Worker heartbeats (convergence.workers.heartbeat): a worker is up while its last
    # heartbeat is younger than three of these.
    heartbeat_seconds: float = 5.0
    # A worker told to stop: how long the steps in hand have to reach their commit point;
    # ``convergence api`` told to stop: how long requests in flight have to finish.
    shutdown_grace_seconds: float = 10.0
    # Where servers, wait conditions and alarms reach the API (the signal URLs the engine
    # hands out name it): the address the API serves on, seen from the servers.
    public_url: str = DEFAULT_PUBLIC_URL
    # What those URLs are signed with (None: a key the engine makes and keeps in its
    # database). A secret.
    signing_key: str | None = field(default=None, repr=False)
    # How long a signed URL is good for after the resource version it names was made (None:
    # for as long as that version is the resource's, as Heat's).
    signed_url_seconds: float | None = None
    # What the secrets the store keeps are encrypted with: Fernet keys, newest first (the
    # first encrypts, all decrypt); empty: see ``convergence.store.sealing.open_sealer``.
    # Secrets: never shown.
    encryption_keys: tuple[str, ...] = field(default=(), repr=False)
    # Benchmarks: a worker process writes its figures to ``<stats_dir>/<pid>.json``.
    stats_dir: str | None = None

    @property
    def embedded(self) -> bool:
        return self.broker_url is None

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


def default_database_url(data_dir: Path | None = None) -> str:
    folder = data_dir or Path(platformdirs.user_data_dir("convergence"))
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'convergence.db'}"


def _seconds(value: str | None) -> float | None:
    """An optional number of seconds (unset, empty or 0: None, the feature is off)."""
    return float(value) or None if value else None


def auth_mode(value: str | None) -> str:
    """``CONVERGENCE_AUTH`` checked: noauth (the default), token or keystone."""
    mode = (value or "noauth").strip().lower()
    if mode not in ("noauth", "token", "keystone"):
        raise ValueError(f"CONVERGENCE_AUTH must be noauth, token or keystone, not {value!r}")
    return mode


def flag(name: str, value: str | None) -> bool:
    """A boolean setting: true/1/yes/on or false/0/no/off (unset: false)."""
    if value is None:
        return False
    word = value.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"{_PREFIX}{name} must be true or false, not {value!r}")


def cidrs(name: str, value: str | None) -> tuple[str, ...]:
    """A comma-separated list of networks (10.0.0.0/8, fd00::/8; a bare address is its own
    network), each checked and normalized (host bits cleared)."""
    found = []
    for item in (value or "").split(","):
        if item.strip():
            try:
                found.append(str(ipaddress.ip_network(item.strip(), strict=False)))
            except ValueError:
                raise ValueError(f"{_PREFIX}{name} must be comma-separated networks "
                                 f"(CIDRs), not {item.strip()!r}") from None
    return tuple(found)


def project_clouds(value: str | None) -> dict[str, tuple[str, ...]]:
    """``CONVERGENCE_PROJECT_CLOUDS``: ``project=cloud`` pairs, comma-separated; a project
    named twice has several clouds, the first its default."""
    found: dict[str, tuple[str, ...]] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        project, sep, cloud = (part.strip() for part in item.partition("="))
        if not sep or not project or not cloud:
            raise ValueError(f"{_PREFIX}PROJECT_CLOUDS: {item.strip()!r} is not project=cloud")
        if cloud not in found.get(project, ()):
            found[project] = (*found.get(project, ()), cloud)
    return found


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ

    def get(name: str) -> str | None:
        value = env.get(_PREFIX + name)
        return value if value else None

    data_dir = get("DATA_DIR")
    database_url = get("DATABASE_URL") or default_database_url(Path(data_dir) if data_dir else None)
    return Settings(
        database_url=database_url,
        broker_url=get("BROKER_URL"),
        lease_seconds=float(get("LEASE_SECONDS") or 30.0),
        sweep_seconds=float(get("SWEEP_SECONDS") or 5.0),
        batch_size=int(get("BATCH_SIZE") or 200),
        poll_seconds=float(get("POLL_SECONDS") or 1.0),
        action_retry_limit=int(get("ACTION_RETRY_LIMIT") or 5),
        max_nested_depth=int(get("MAX_NESTED_DEPTH") or 5),
        max_tree_resources=int(get("MAX_TREE_RESOURCES") or 0),
        observe_seconds=_seconds(get("OBSERVE_SECONDS")),
        observe_per_pass=int(get("OBSERVE_PER_PASS") or 100),
        inline_seconds=float(get("INLINE_SECONDS") or 0.5),
        max_request_bytes=int(get("MAX_REQUEST_BYTES") or DEFAULT_MAX_REQUEST_BYTES),
        max_template_bytes=int(get("MAX_TEMPLATE_BYTES") or DEFAULT_MAX_TEMPLATE_BYTES),
        auth=auth_mode(get("AUTH")),
        allow_noauth=flag("ALLOW_NOAUTH", get("ALLOW_NOAUTH")),
        tokens_file=get("TOKENS_FILE"),
        policy_file=get("POLICY_FILE"),
        keystone_url=get("KEYSTONE_URL"),
        keystone_service_token=get("KEYSTONE_SERVICE_TOKEN"),
        stack_clouds=tuple(c.strip() for c in (get("STACK_CLOUDS") or "").split(",")
                           if c.strip()),
        project_clouds=project_clouds(get("PROJECT_CLOUDS")),
        webhook_backoff_seconds=float(get("WEBHOOK_BACKOFF_SECONDS") or 1.0),
        webhook_max_attempts=int(get("WEBHOOK_MAX_ATTEMPTS") or 8),
        webhook_allowed_networks=cidrs("WEBHOOK_ALLOWED_NETWORKS",
                                       get("WEBHOOK_ALLOWED_NETWORKS")),
        max_subscriptions_per_tenant=int(get("MAX_SUBSCRIPTIONS_PER_TENANT") or 100),
        heartbeat_seconds=float(get("HEARTBEAT_SECONDS") or 5.0),
        shutdown_grace_seconds=float(get("SHUTDOWN_GRACE_SECONDS") or 10.0),
        stats_dir=get("STATS_DIR"),
        public_url=(get("PUBLIC_URL") or DEFAULT_PUBLIC_URL).rstrip("/"),
        signing_key=get("SIGNING_KEY"),
        encryption_keys=tuple(k.strip() for k in (get("ENCRYPTION_KEYS") or "").split(",")
                              if k.strip()),
        signed_url_seconds=_seconds(get("SIGNED_URL_SECONDS")),
    )
