"""The plugin port: what a resource plugin is, and what it is called with and given.

A plugin is a schema, and actions that start at once and are polled. The engine's step calls a
plugin with resolved properties; the plugin never sleeps. An action either finishes
(``Progress.finished``) or says it is pending with the state it needs to be polled later
(``Progress.pending``): the engine stores that state, frees the worker and calls ``poll`` after
the delay, possibly on another worker. Every action is idempotent: before creating, a plugin
looks for what an interrupted attempt of the same record created (by ``ctx.owner``) and adopts
it, so a crash between the cloud call and the database write neither leaks nor duplicates.

Errors carry their retry meaning: :class:`ResourceFailure` fails the resource (permanent);
:class:`RetryLater` asks for the same call again after a delay (transient).

What a plugin talks to (a cloud's client, the table standing for a cloud API that
OS::Heat::TestResource uses) is a backend: the plugin class declares how to build it
(``backends``), the registry builds it once per runtime from the :class:`PluginHost` the
runtime hands every plugin (``PluginRegistry.bind``), and a call finds it by name in
``ctx.backends``. The engine passes them along without knowing any of them.

Callers: the engine (its steps and its removal of orphans build a :class:`PluginContext` and
call plugins), ``convergence.runtime`` (the :class:`PluginHost`), the registry, every plugin.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

from convergence.ports.entity_tables import EntityTables
from convergence.template.nesting import ChildTemplate
from convergence.template.properties import TypeSchema

CREATE, UPDATE, DELETE = "CREATE", "UPDATE", "DELETE"
# What the observer does about a resource of a type that it finds missing, in ERROR or
# drifted (``ResourcePlugin.observe_policy``): converge the stack, mark it unhealthy (the
# next update replaces it), or only say so in the events.
REPAIR, MARK_UNHEALTHY, REPORT = "repair", "mark_unhealthy", "report"


class ResourceFailure(Exception):
    """The action failed for good; the message is the resource's status reason.

    ``physical_id``: what the failed action left in the cloud (a server in ERROR), when
    something is there. A create that failed so is tried again by replacing it: a new
    physical resource, the failed one deleted after (``action_retry_limit`` bounds it).
    """

    def __init__(self, message: str = "", physical_id: str | None = None) -> None:
        super().__init__(message)
        self.physical_id = physical_id


class RetryLater(Exception):
    """A transient problem (a 409, a 503, a rate limit): call again after ``delay`` seconds."""

    def __init__(self, message: str, delay: float = 1.0) -> None:
        super().__init__(message)
        self.delay = delay


@dataclass(frozen=True, slots=True)
class Progress:
    """Where an action stands after a call."""

    done: bool
    physical_id: str | None = None
    state: Mapping[str, Any] = field(default_factory=dict)
    delay: float = 0.0
    attributes: Mapping[str, Any] | None = None
    # Not done, and nothing to poll: it waits on an event of the engine's own (a nested
    # stack's end), which steps it again. Its node holds no worker, lease or timer meanwhile.
    park: bool = False

    @classmethod
    def parked(cls, state: Mapping[str, Any], physical_id: str | None = None,
               wake_in: float = 0.0) -> Progress:
        """Waiting on an event; ``wake_in`` > 0: stepped again after that many seconds at
        the latest (a timeout), whether the event came or not."""
        return cls(False, physical_id, state, wake_in, None, park=True)

    @classmethod
    def finished(cls, physical_id: str | None = None,
                 attributes: Mapping[str, Any] | None = None) -> Progress:
        return cls(True, physical_id, {}, 0.0, attributes)

    @classmethod
    def pending(cls, delay: float, state: Mapping[str, Any],
                physical_id: str | None = None) -> Progress:
        return cls(False, physical_id, state, delay, None)


@dataclass(frozen=True, slots=True)
class Observation:
    """What a resource really is, as ``observe`` found it in the cloud.

    ``exists``: the cloud has it; ``healthy``: it is in a working state (not ERROR);
    ``reason``: why not (the cloud's fault message); ``properties``: the current values of
    the properties the type can read back (only those: the others are not compared), which a
    check compares with what the record says it converged to.
    """

    exists: bool
    healthy: bool = True
    reason: str = ""
    properties: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def missing(cls, reason: str = "not found in the cloud") -> Observation:
        return cls(False, False, reason)

    @classmethod
    def broken(cls, reason: str, properties: Mapping[str, Any] | None = None) -> Observation:
        return cls(True, False, reason, properties or {})

    @classmethod
    def fine(cls, properties: Mapping[str, Any] | None = None) -> Observation:
        return cls(True, True, "", properties or {})


@dataclass(frozen=True, slots=True)
class CloudScope:
    """Whose cloud a stack's resources live in: ``cloud`` names a ``clouds.yaml`` entry (None:
    the cloud the process is configured with) and ``trust_id`` a Keystone trust the caller
    gave the engine (None: the cloud's own credentials), so that work outliving the caller's
    token is done in the caller's project. Neither is a secret: a trust is of use only with
    the engine's own credentials."""

    cloud: str | None = None
    trust_id: str | None = None

    @property
    def cloudless(self) -> bool:
        """The stack reaches no cloud: its project has no credentials of its own
        (:data:`NO_CLOUD`)."""
        return self.cloud == NO_CLOUD


DEFAULT_SCOPE = CloudScope()
# The ``cloud`` of a stack whose project has no cloud credentials of its own (token mode with
# no cloud mapped to the project; keystone mode when no trust into the project could be
# made): its resources that need a cloud are refused at acceptance, and fail if they ever
# reach a step; the engine's own credentials are never used in its place. Not a name a
# ``clouds.yaml`` entry can be given by the API (one that starts with "<" is refused there).
NO_CLOUD = "<none>"


@dataclass(frozen=True, slots=True)
class Delegation:
    """A caller Keystone authenticated, handing its work to the engine: its token (a secret:
    never shown, logged or kept), project, user and roles (ids). A cloud backend turns it
    into a trust (``CloudScope.trust_id``) that outlives the token."""

    token: str = field(repr=False)
    project_id: str
    user_id: str
    role_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PluginHost:
    """What the runtime hands every plugin to build its backends with.

    ``entity_tables``: the store's tables for plugin backends (None: the store keeps none);
    ``environ``: where a plugin reads its own settings from, once, as its backends are built;
    ``fallback_cloud``: what to use when that names no cloud; ``no_cloud``: why there is
    none when neither gives one, said where a resource needing a cloud is refused.
    """

    now: Callable[[], float]
    entity_tables: EntityTables | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    # The environment of a cloud to use when ``environ`` names none, made on first use (the
    # embedded mode starts a simulated cloud): None, no such fallback.
    fallback_cloud: Callable[[], Mapping[str, str]] | None = None
    # Why no cloud is reachable when ``environ`` names none and there is no fallback (the
    # embedded command line without the simulated cloud installed): None, the cloud
    # plugins' own message, naming the settings.
    no_cloud: str | None = None
    # The engine's own stacks, for the types whose resources are nested stacks
    # (a :class:`ChildStacks`); None: this runtime makes none.
    stacks: object | None = None
    # The engine's software configuration and signed URLs (a
    # :class:`convergence.plugins.software_port.SoftwareBackend`); None: none.
    software: object | None = None


@dataclass(frozen=True, slots=True)
class ChildState:
    """A nested stack as its parent's resource sees it."""

    id: str
    name: str
    action: str  # CREATE UPDATE DELETE ...
    status: str  # IN_PROGRESS COMPLETE FAILED
    reason: str
    template_id: str | None  # what its latest request converges to
    outputs: Mapping[str, Any]  # name -> value (an output that failed to resolve: None)
    deleted: bool


class ChildStacks(Protocol):
    """The engine's stacks, as a resource that is a nested stack reaches them: every call is
    idempotent, and the child's end wakes the resource's node (the plugin parks). The parent
    is ``ctx``'s stack and the owner is ``ctx.owner``'s record. Refusals raise
    :class:`ResourceFailure` (an invalid template, a tree too deep or too big)."""

    def create(self, ctx: PluginContext, child: ChildTemplate,
               timeout_mins: int | None = None) -> ChildState: ...
    # The live child ``ctx.owner``'s record made already (an earlier attempt's), if any.
    def existing(self, ctx: PluginContext) -> ChildState | None: ...
    def update(self, ctx: PluginContext, child_id: str, child: ChildTemplate,
               timeout_mins: int | None = None) -> ChildState: ...
    def delete(self, ctx: PluginContext, child_id: str) -> ChildState | None: ...
    def state(self, ctx: PluginContext, child_id: str) -> ChildState | None: ...
    # The child's resources as they are: name -> status (a group's members; the FAILED ones
    # are its first victims).
    def resources(self, ctx: PluginContext, child_id: str) -> dict[str, str]: ...
    # The child's resources' references (what ``get_resource`` gives): name -> reference, of
    # those that have one (a group's ``refs_map`` when its outputs do not carry it).
    def references(self, ctx: PluginContext, child_id: str) -> dict[str, str]: ...


# A backend a plugin talks to (a cloud's client, a table standing for a cloud API), built by a
# factory the plugin class declares (``ResourcePlugin.backends``) from what the runtime hands
# every plugin. The registry builds each once per runtime (``PluginRegistry.bind``) and the
# engine hands them to every call in ``PluginContext.backends``, knowing none of them.
BackendFactory = Callable[[PluginHost], object | None]
# A custom constraint a plugin knows (``ResourcePlugin.constraints``): given the runtime's
# backends, the stack's cloud and a value, an error message, or None when the value is fine.
# Checked when a template is accepted, never by the engine's steps.
ConstraintCheck = Callable[[Mapping[str, Any], CloudScope, Any], str | None]
NO_BACKENDS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PluginContext:
    """What a plugin may use: who it works for, a clock, and the backends it talks to."""

    owner: str  # stable key of the resource record: what an interrupted attempt is found by
    stack_id: str
    stack_name: str
    resource_name: str
    now: Callable[[], float]
    # The backends of the runtime's plugins by name (see ``BackendFactory``).
    backends: Mapping[str, Any] = field(default_factory=lambda: NO_BACKENDS)
    # Whether the engine still holds the resource's lease: a plugin asks right before each
    # change it makes in the cloud, so that a worker that woke up past its lease (frozen,
    # or too slow) changes nothing that is someone else's now.
    lease_good: Callable[[], bool] = lambda: True
    # No step ever acted on this record before (its first claim): an interrupted attempt
    # cannot have made anything, so a create need not look for what one made.
    first_attempt: bool = False
    # The stack's cloud and credentials (see ``CloudScope``).
    scope: CloudScope = DEFAULT_SCOPE
    # A template resource's child stack as its definition makes it (None: any other type).
    child: ChildTemplate | None = None
    # The stack's tenant (a resource's own URLs name it).
    stack_tenant: str = ""

    def check_lease(self) -> None:
        """Raise :class:`RetryLater` if the lease is gone (call right before a change)."""
        if not self.lease_good():
            raise RetryLater("the lease was lost: the resource is someone else's now", 0.0)


class ResourcePlugin(Protocol):
    """One resource type. Instances are stateless; all state is in the store."""

    schema: ClassVar[TypeSchema]
    # A preemptible plugin may abandon a pending action when a newer definition arrives.
    preemptible: ClassVar[bool]
    # The backends the plugin talks to, by name: factories the registry builds them with.
    backends: ClassVar[Mapping[str, BackendFactory]]
    # What the observer does about one found wrong: REPAIR, MARK_UNHEALTHY or REPORT.
    observe_policy: ClassVar[str]

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress: ...

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress: ...

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress: ...

    # ``deletion_policy: Snapshot``, for a type whose schema says ``snapshot``: take a
    # snapshot of what ``physical_id`` holds, then delete it (Heat's handle_snapshot_delete);
    # polled as a DELETE, like ``delete``.
    def snapshot_delete(self, ctx: PluginContext, physical_id: str | None,
                        props: Mapping[str, Any]) -> Progress: ...

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress: ...

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool: ...

    # An external resource (``external_id``): ``physical_id`` exists already and is not the
    # stack's; read its attributes, make nothing. ResourceFailure when it is not there.
    def adopt(self, ctx: PluginContext, physical_id: str,
              props: Mapping[str, Any]) -> Progress: ...

    # What ``physical_id`` really is in the cloud (a ``stack check``, an update that
    # converges with reality); None: the type cannot tell, and counts as healthy. Raises
    # RetryLater when the cloud does not answer.
    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None: ...

    def reference_id(self, physical_id: str | None, props: Mapping[str, Any],
                     attributes: Mapping[str, Any]) -> Any: ...

    # Remove ``physical_id``, and only it: something made for this resource by a step whose
    # lease had been taken over, that no record names (an orphan). Raises RetryLater to be
    # asked again later; what is already gone counts as removed.
    def discard(self, ctx: PluginContext, physical_id: str) -> None: ...


class PluginBase:
    """Defaults shared by plugins: replacement by schema, no polling, physical id as ref."""

    schema: ClassVar[TypeSchema]
    preemptible: ClassVar[bool] = False
    backends: ClassVar[Mapping[str, BackendFactory]] = NO_BACKENDS
    observe_policy: ClassVar[str] = REPORT

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        return Progress.finished(physical_id)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        return Progress.finished(physical_id)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        return Progress.finished(physical_id)

    def snapshot_delete(self, ctx: PluginContext, physical_id: str | None,
                        props: Mapping[str, Any]) -> Progress:
        """A type that takes no snapshots deletes nothing it was told to keep a snapshot of:
        validation refuses the policy for it, and a template stored before that still fails
        the delete here rather than lose what a snapshot was meant to keep."""
        raise ResourceFailure(f'"Snapshot" deletion policy not supported: resource type '
                              f"'{self.schema.name}' takes no snapshots; nothing deleted")

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        """Nothing in a cloud, nothing to remove."""

    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None:
        """Nothing in a cloud to look at: a check cannot tell, and counts it healthy."""
        return None

    def adopt(self, ctx: PluginContext, physical_id: str,
              props: Mapping[str, Any]) -> Progress:
        """Nothing in a cloud to read: the id as it is given, no attributes."""
        return Progress.finished(physical_id, {})

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Replace when a property that cannot be updated in place changed."""
        schemas = self.schema.properties
        if schemas is None:
            return False
        for name in set(old) | set(new):
            if old.get(name) != new.get(name):
                prop = schemas.get(name)
                if prop is None or not prop.update_allowed:
                    return True
        return False

    def reference_id(self, physical_id: str | None, props: Mapping[str, Any],
                     attributes: Mapping[str, Any]) -> Any:
        return physical_id
