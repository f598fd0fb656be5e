"""Use cases shared by the CLI and the API: each takes plain input and returns plain data.

Callers: ``convergence.cli`` and (with the API) ``convergence.api``. Errors in user input leave
as ``TemplateError`` with every problem and its path; the callers decide how to show them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from convergence.admission import SizeLimits, check_content, check_sizes, check_stack_name
from convergence.engine.definitions import build_definition
from convergence.engine.traversals import begin_rollback, begin_traversal, stop_traversal
from convergence.errors import Conflict, InvalidParameter, NotFound, PreconditionFailed
from convergence.holds import StackHolds
from convergence.plugins.registry import PluginRegistry
from convergence.ports.pages import EventQuery, ResourcePage, ResourceQuery
from convergence.ports.store import Tx
from convergence.ports.views import (
    API,
    WORKER,
    EventView,
    NewEvent,
    RecordView,
    StackView,
    TemplateContent,
    template_id,
)
from convergence.ports.work import PLAN, Work
from convergence.template import (
    DEFAULT_LIMITS,
    Environment,
    ParameterSchema,
    Problems,
    TemplateError,
    TypeCatalog,
    load_document,
    parse_environment,
    validate_stack,
)
from convergence.template.constraints import (
    AllowedPattern,
    AllowedValues,
    CustomConstraint,
    Length,
    Modulo,
    Range,
)
from convergence.template.parameters import NO_DEFAULT

if TYPE_CHECKING:
    from convergence.runtime import Runtime

_HEAT_TYPES = {
    "string": "String", "number": "Number", "comma_delimited_list": "CommaDelimitedList",
    "json": "Json", "boolean": "Boolean",
}

log = logging.getLogger(__name__)


def default_catalog() -> PluginRegistry:
    return PluginRegistry.from_entry_points()


def load_environments(documents: Sequence[Any], names: Sequence[str] | None = None,
                      problems: Problems | None = None) -> list[Environment]:
    """Parse environment documents (already loaded data), collecting their problems."""
    problems = problems if problems is not None else Problems()
    envs = []
    for i, doc in enumerate(documents):
        what = names[i] if names else f"environment[{i}]"
        envs.append(parse_environment(doc, what, problems))
    return envs


def validate_template(
    template: str | bytes | Mapping[str, Any],
    *,
    files: Mapping[str, str] | None = None,
    location: str | None = None,
    environments: Sequence[Any] = (),
    parameters: Mapping[str, Any] | None = None,
    catalog: TypeCatalog | None = None,
    sizes: SizeLimits | None = None,
) -> dict[str, Any]:
    """Validate a template as Heat's ``template validate`` does; return Heat's answer shape.

    Raises TemplateError with the problems of the environments and the template together;
    input over ``sizes`` (default: the default settings' limits) is refused unparsed.
    """
    sizes = sizes or SizeLimits()
    check_sizes(template, files, environments, parameters, sizes)
    problems = Problems()
    envs = load_environments(environments, problems=problems)
    try:
        stack = validate_stack(template, catalog=catalog or default_catalog(), files=files,
                               location=location, environments=envs, parameters=parameters,
                               limits=dataclasses.replace(DEFAULT_LIMITS,
                                                          max_bytes=sizes.document))
    except TemplateError as exc:
        problems.extend(exc.problems)
    problems.raise_if_any()
    t = stack.template
    return {
        "Description": t.description or "",
        "Parameters": {name: describe_parameter(p, stack.environment.parameter_defaults)
                       for name, p in t.parameters.items()},
        "ParameterGroups": [
            {"label": g.label, "description": g.description, "parameters": list(g.parameters)}
            for g in t.parameter_groups
        ],
        "ResourceCount": len(stack.resource_types),
    }


def describe_parameter(p: ParameterSchema, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """One parameter in Heat's validate format (hidden defaults are never shown)."""
    out: dict[str, Any] = {
        "Type": _HEAT_TYPES.get(p.type, p.type),
        "Description": p.description or "",
        "Label": p.label or p.name,
        "NoEcho": "true" if p.hidden else "false",
    }
    default = defaults.get(p.name, p.default)
    if default is not NO_DEFAULT:
        out["Default"] = "******" if p.hidden else default
    if p.immutable:
        out["Immutable"] = True
    if p.tags:
        out["Tags"] = list(p.tags)
    out.update(_heat_constraints(p))
    return out


def _heat_constraints(p: ParameterSchema) -> dict[str, Any]:
    """Constraints the way Heat's validate shows them (MinLength, AllowedValues, ...)."""
    out: dict[str, Any] = {}
    descriptions = []
    for c in p.constraints:
        if isinstance(c, Length | Range):
            prefix = "Length" if isinstance(c, Length) else "Value"
            if c.min is not None:
                out[f"Min{prefix}"] = c.min
            if c.max is not None:
                out[f"Max{prefix}"] = c.max
        elif isinstance(c, Modulo):
            out["Modulo"] = {"step": c.step, "offset": c.offset}
        elif isinstance(c, AllowedValues):
            out["AllowedValues"] = list(c.values)
        elif isinstance(c, AllowedPattern):
            out["AllowedPattern"] = c.pattern
        elif isinstance(c, CustomConstraint):
            out["CustomConstraint"] = c.name
        if c.description:
            descriptions.append(c.description)
    if descriptions:
        out["ConstraintDescription"] = " ".join(descriptions)
    return out


# Stacks ------------------------------------------------------------------------------------

TERMINAL = ("COMPLETE", "FAILED")


def _content(template: str, files: Mapping[str, str] | None, environments: Sequence[Any],
             parameters: Mapping[str, Any] | None) -> TemplateContent:
    return TemplateContent(text=template, files=dict(files or {}),
                           environments=tuple(environments), parameters=dict(parameters or {}))


def _accept(rt: Runtime, content: TemplateContent) -> None:
    """Refuse invalid input before anything is stored (raises TemplateError), input over the
    size limits unparsed; the engine of this process (embedded: the one that plans it) keeps
    what was built."""
    check_content(content, rt.settings)
    rt.engine.definitions.put(template_id(content), build_definition(content, rt.registry))


def _put_template(rt: Runtime, tx: Tx, content: TemplateContent) -> str:
    """Store accepted content with its template's description (from the definition
    ``_accept`` built: no second parse)."""
    definition = rt.engine.definitions.get(template_id(content), lambda _: content)
    return tx.put_template(content, description=definition.template.description or "")


def _stack_or_404(tx: Tx, tenant: str, name_or_id: str) -> StackView:
    stack = tx.find_stack(tenant, name_or_id)
    if stack is None:
        raise NotFound(f"The Stack ({name_or_id}) could not be found.")
    return stack


def _locked_stack(tx: Tx, tenant: str, name_or_id: str) -> StackView:
    """The stack, its row locked until the transaction ends: requests on one stack queue
    up, so each sees the generation the one before it set."""
    found = _stack_or_404(tx, tenant, name_or_id)
    stack = tx.stack(found.id, lock=True)
    if stack is None:
        raise NotFound(f"The Stack ({name_or_id}) could not be found.")
    return stack


def _expect(stack: StackView, expected_generation: int | None) -> None:
    """``If-Match``: refuse to act on a stack that moved past the generation the client saw
    (checked inside the request's transaction, so two careful writers cannot both pass)."""
    if expected_generation is not None and expected_generation != stack.generation:
        raise PreconditionFailed(
            f"The Stack ({stack.name}) is at generation {stack.generation}, not "
            f"{expected_generation}.")


def _refuse_while_deleting(stack: StackView, what: str) -> None:
    if stack.action == "DELETE":
        raise Conflict(f"The Stack ({stack.name}) is being deleted; it cannot be {what}.")


def create_stack(rt: Runtime, tenant: str, name: str, template: str, *,
                 files: Mapping[str, str] | None = None, environments: Sequence[Any] = (),
                 parameters: Mapping[str, Any] | None = None, timeout_mins: int | None = None,
                 disable_rollback: bool = False) -> StackView:
    """Accept a new stack: generation 1, CREATE_IN_PROGRESS committed before returning.

    Unless ``disable_rollback``, a failed create is rolled back (everything it made deleted).
    A name Heat would refuse is refused (TemplateError), as input over the size limits is.
    """
    check_stack_name(name)
    content = _content(template, files, environments, parameters)
    _accept(rt, content)
    stack_id = str(uuid.uuid4())

    def accept(tx: Tx) -> tuple[StackView, str]:
        if tx.find_stack(tenant, name) is not None:
            raise Conflict(f"The Stack ({name}) already exists.")
        tid = _put_template(rt, tx, content)
        # Two creates of one name that both passed the look-up: the unique index on live
        # names refuses the second (Conflict), whichever commits first.
        tx.insert_stack(stack_id, tenant, name, timeout_mins=timeout_mins,
                        disable_rollback=disable_rollback)
        stack = tx.stack(stack_id)
        assert stack is not None
        traversal_id = begin_traversal(tx, stack, "CREATE", tid)
        return _stack_or_404(tx, tenant, stack_id), traversal_id

    stack, traversal_id = rt.store.transact(accept)
    _start(rt, traversal_id)
    return stack


def requested_content(current: TemplateContent | None, template: str | None,
                      files: Mapping[str, str] | None, environments: Sequence[Any] | None,
                      parameters: Mapping[str, Any] | None, *, existing: bool,
                      clear_parameters: Sequence[str] = ()) -> TemplateContent:
    """What an update asks for. ``existing`` (PATCH): the current template, environment and
    parameters with what is given on top; ``clear_parameters`` drops kept values."""
    if template is None:
        if not existing or current is None:
            raise ValueError("a template is required (or use the existing one)")
        template = current.text
    if existing and current is not None:
        files = {**current.files, **(files or {})}
        environments = list(current.environments) + list(environments or [])
        parameters = {**current.parameters, **(parameters or {})}
    if clear_parameters:
        given = dict(parameters or {})
        for name in clear_parameters:
            given.pop(name, None)
        parameters = given
    return _content(template, files, environments or (), parameters)


def update_stack(rt: Runtime, tenant: str, name_or_id: str, template: str | None = None, *,
                 files: Mapping[str, str] | None = None, environments: Sequence[Any] | None = None,
                 parameters: Mapping[str, Any] | None = None, existing: bool = False,
                 timeout_mins: int | None = None,
                 clear_parameters: Sequence[str] = (), disable_rollback: bool | None = None,
                 expected_generation: int | None = None) -> StackView:
    """Accept an update; it supersedes whatever traversal is running.

    ``existing`` (PATCH): start from the stack's current template, environment and parameters
    and apply what is given on top; ``clear_parameters`` drops kept values (back to defaults).
    ``disable_rollback`` changes the stack's setting (None keeps it); ``expected_generation``
    refuses the update (PreconditionFailed) if the stack moved past it.

    What a PATCH builds on is the stack's template as the accepting transaction finds it, with
    the stack row locked: two PATCHes never merge from one copy, so neither undoes the other.
    The merge is made and validated first from a plain read (no lock held while a large
    template is validated); when another request was accepted in between, it is made again
    from what the lock found.
    """
    def requested(current: TemplateContent | None) -> TemplateContent:
        content = requested_content(current, template, files, environments, parameters,
                                    existing=existing, clear_parameters=clear_parameters)
        _accept(rt, content)
        return content

    with rt.store.read() as tx:
        stack = _stack_or_404(tx, tenant, name_or_id)
        based_on = stack.template_id
        current = tx.template(based_on) if based_on else None
    _refuse_while_deleting(stack, "updated")
    _expect(stack, expected_generation)
    content = requested(current)
    stack_id = stack.id

    def accept(tx: Tx) -> tuple[StackView, str]:
        stack = _locked_stack(tx, tenant, stack_id)
        _refuse_while_deleting(stack, "updated")
        _expect(stack, expected_generation)
        wanted = content
        if existing and stack.template_id != based_on:
            wanted = requested(tx.template(stack.template_id) if stack.template_id else None)
        changes: dict[str, Any] = {}
        if timeout_mins is not None:
            changes["timeout_mins"] = timeout_mins
        if disable_rollback is not None:
            changes["disable_rollback"] = disable_rollback
        if changes:
            tx.update_stack(stack.id, **changes)
            stack = _stack_or_404(tx, tenant, stack.id)
        traversal_id = begin_traversal(tx, stack, "UPDATE", _put_template(rt, tx, wanted))
        return _stack_or_404(tx, tenant, stack.id), traversal_id

    stack, traversal_id = rt.store.transact(accept)
    _start(rt, traversal_id)
    return stack


def delete_stack(rt: Runtime, tenant: str, name_or_id: str, *,
                 expected_generation: int | None = None) -> StackView:
    """Delete wins over everything before it."""

    def accept(tx: Tx) -> tuple[StackView, str | None]:
        stack = _locked_stack(tx, tenant, name_or_id)
        if stack.deleted_at is not None:
            return stack, None
        _expect(stack, expected_generation)
        traversal_id = begin_traversal(tx, stack, "DELETE", None)
        return _stack_or_404(tx, tenant, stack.id), traversal_id

    stack, traversal_id = rt.store.transact(accept)
    if traversal_id is not None:
        _start(rt, traversal_id)
    return stack


CANCELLABLE = ("CREATE", "UPDATE")


def cancel_stack(rt: Runtime, tenant: str, name_or_id: str, *, rollback: bool = True,
                 expected_generation: int | None = None) -> StackView:
    """Cancel the create or update in progress (Heat's ``cancel_update`` and
    ``cancel_without_rollback``); it gets a generation like any request.

    With ``rollback`` the stack goes back to the last template that converged (for a create:
    to nothing), ending ``ROLLBACK_COMPLETE``; without, the running traversal stops where it
    is and the stack is ``CREATE_FAILED`` or ``UPDATE_FAILED`` at once. Conflict unless a
    create or update is in progress.
    """
    def accept(tx: Tx) -> tuple[StackView, str | None]:
        stack = _locked_stack(tx, tenant, name_or_id)
        _expect(stack, expected_generation)
        if stack.status != "IN_PROGRESS" or stack.action not in CANCELLABLE:
            raise Conflict(f"The Stack ({stack.name}) is {stack.stack_status}: only a create "
                           "or an update in progress can be cancelled.")
        traversal_id: str | None = None
        if rollback:
            traversal_id = begin_rollback(
                tx, stack, f"Stack {stack.action} cancelled: rolling back")
        else:
            stop_traversal(tx, stack, f"Stack {stack.action} cancelled")
        return _stack_or_404(tx, tenant, stack.id), traversal_id

    stack, traversal_id = rt.store.transact(accept)
    if traversal_id is not None:
        _start(rt, traversal_id)
    return stack


def _start(rt: Runtime, traversal_id: str) -> None:
    """Send a committed traversal's plan. The request is accepted once committed: if the
    broker cannot take the message now, the sweeper plans the traversal (it finds every
    traversal left waiting to be planned), so the caller is not told it failed."""
    try:
        rt.dispatcher.dispatch([Work(PLAN, traversal_id)])
    except Exception:
        log.exception("could not send the plan of traversal %s: the sweeper will", traversal_id)


def reset_stack(rt: Runtime, tenant: str, name_or_id: str) -> tuple[StackView, int]:
    """For an operator (``convergence admin reset``): let go of every lease and poll watch on
    the stack's resources (late writers are then refused) and, if a request is in progress,
    stop it where it is, as a cancel without rollback does; the stack ends FAILED and takes
    any request after. Returns the stack and how many leases were let go of.

    Nothing needs this to recover from a crash (the sweeper does that): it is for a human who
    wants a stack out of whatever it is doing now.
    """
    def reset(tx: Tx) -> tuple[StackView, int]:
        stack = _locked_stack(tx, tenant, name_or_id)
        released = tx.release_stack_leases(stack.id)
        if stack.status == "IN_PROGRESS":
            stop_traversal(tx, stack, f"Stack {stack.action} reset by an administrator")
        return _stack_or_404(tx, tenant, stack.id), released

    return rt.store.transact(reset)


def get_stack(rt: Runtime, tenant: str, name_or_id: str) -> StackView:
    with rt.store.read() as tx:
        return _stack_or_404(tx, tenant, name_or_id)


def list_stacks(rt: Runtime, tenant: str, *, include_deleted: bool = False) -> list[StackView]:
    with rt.store.read() as tx:
        return tx.stacks(tenant, include_deleted=include_deleted)


def list_resources(rt: Runtime, tenant: str, name_or_id: str) -> list[RecordView]:
    """Every record of the stack, in id order: the current version of each resource and the
    replaced versions still being cleaned up. For a listing as Heat shows it (one version per
    resource, paged, filtered), see :func:`resource_page` and :func:`resource_chunks`."""
    with rt.store.read() as tx:
        stack = _stack_or_404(tx, tenant, name_or_id)
        return tx.records(stack.id)


def resource_page(rt: Runtime, tenant: str, name_or_id: str,
                  query: ResourceQuery) -> ResourcePage:
    """One page of the stack's resources, as Heat lists them (the version of each the stack
    uses), with who requires each; paged, ordered and filtered by the database
    (``Tx.resource_page``). InvalidParameter when the order needs the marker's
    values and the marker is not a resource of the stack."""
    with rt.store.read() as tx:
        stack = _stack_or_404(tx, tenant, name_or_id)
        found = tx.resource_page(stack.id, query)
    if found is None:
        raise _not_a_resource(query, stack)
    return found


def resource_chunks(rt: Runtime, tenant: str, name_or_id: str, query: ResourceQuery,
                    chunk: int = 500) -> Generator[ResourcePage, None, None]:
    """The listing ``query`` asks for (all of it when its limit is None), in pages of at most
    ``chunk`` resources; each page is read in a transaction of its own, and nothing is held
    between pages, so the caller may stop after any page (a client that went away) and a long
    listing keeps no snapshot open. The first page raises what :func:`resource_page` raises.

    A page continues after the last resource of the one before (by its values, so a resource
    deleted meanwhile does not lose the place); each costs the same wherever it falls, so a
    listing of N resources costs O(N). ``query.nested_depth``: no resource type owns a nested
    stack yet, so the stack's own resources are the listing at any depth; a nested stack's
    resources would follow here, each listing of a child one level shallower.
    """
    if chunk < 1:
        raise ValueError("chunk must be at least 1")
    left = query.limit
    last: RecordView | None = None  # the last resource listed so far
    stack_id = name_or_id
    while left is None or left > 0:
        size = chunk if left is None else min(chunk, left)
        with rt.store.read() as tx:
            stack = _stack_or_404(tx, tenant, stack_id)
            stack_id = stack.id
            found = tx.resource_page(stack.id, dataclasses.replace(query, limit=size),
                                     after=last)
        if found is None:
            raise _not_a_resource(query, stack)
        yield found
        if len(found.records) < size:
            return
        last = found.records[-1]
        if left is not None:
            left -= size


def _not_a_resource(query: ResourceQuery, stack: StackView) -> InvalidParameter:
    return InvalidParameter("marker", f"'marker' must be a resource of the stack when the "
                            f"listing is not in name order: {query.marker} is not a resource "
                            f"of {stack.name}.")


def list_events(rt: Runtime, tenant: str, name_or_id: str, after: int = 0,
                query: EventQuery | None = None) -> list[EventView]:
    """The stack's events after the id ``after``, or the page ``query`` asks for (paged,
    ordered and filtered by the database: ``Tx.event_page``)."""
    with rt.store.read() as tx:
        stack = _stack_or_404(tx, tenant, name_or_id)
        if query is None:
            return tx.events(stack.id, after)
        found = tx.event_page(stack.id, query)
        if found is None:
            raise InvalidParameter("marker", f"'marker' must be an event of the stack: "
                                   f"{query.marker} is not an event of {stack.name}.")
        return found


def resume_stack(rt: Runtime, stack: StackView) -> None:
    """Re-offer a running traversal's work (after the process that ran it stopped)."""
    if stack.traversal_id and stack.status == "IN_PROGRESS":
        rt.dispatcher.dispatch(rt.engine.resume(stack.traversal_id))


_HOLDS_KEY = "convergence.services.holds"


def holding(rt: Runtime, stack_id: str) -> AbstractContextManager[bool]:
    """While the block runs, this process drives the stack's work (embedded mode) and holds
    the stack, so that other processes leave it be (``convergence.holds``). Yields whether it
    holds it: False when another live process does (then it is taken once that one lets go)."""
    found = rt.extra.get(_HOLDS_KEY)
    if not isinstance(found, StackHolds):
        found = rt.extra[_HOLDS_KEY] = StackHolds(rt.store, rt.settings.lease_seconds)
    return found.holding(stack_id)


def abandoned(rt: Runtime, stack: StackView) -> bool:
    """The stack's latest request is unfinished and no live process is on it: the process
    that drove it stopped (Ctrl-C) or died (its hold on the stack ran out), and no worker or
    API process that sweeps this database is up (it would find the work itself). Only such
    work is for a command in embedded mode to resume."""
    if stack.status in TERMINAL and stack.observed_generation == stack.generation:
        return False
    interval = rt.settings.heartbeat_seconds
    with rt.store.read() as tx:
        if tx.stack_holder(stack.id) is not None:
            return False
        now = tx.now
        workers = tx.workers(since=now - 3 * interval)
    return not any(w.kind in (WORKER, API) and w.is_up(now, interval) for w in workers)


def wait_for_stack(rt: Runtime, tenant: str, stack_id: str,
                   on_progress: Callable[[StackView], None] | None = None,
                   timeout: float | None = None, refresh: float = 0.25) -> StackView:
    """Block until the stack's latest request finished; in embedded mode, run it here."""
    deadline = rt.clock.now() + timeout if timeout else None
    seen = {"finishes": -1, "at": 0.0}

    def finished() -> bool:
        # Reading the stack after every work item would cost a transaction per step: read it
        # when a traversal finished here, or ``refresh`` seconds after the last look.
        now = time.monotonic()
        if rt.engine.finishes == seen["finishes"] and now - seen["at"] < refresh:
            return False
        seen["finishes"], seen["at"] = rt.engine.finishes, now
        s = get_stack(rt, tenant, stack_id)
        if on_progress is not None:
            on_progress(s)
        return (s.status in TERMINAL and s.observed_generation == s.generation) or \
            (deadline is not None and rt.clock.now() > deadline)

    inprocess = rt.inprocess
    if inprocess is not None:
        if inprocess.pending() == 0:
            # Nothing queued here: the work was started by a process that is gone.
            resume_stack(rt, get_stack(rt, tenant, stack_id))
        inprocess.run(until=finished)
    else:
        while not finished():
            rt.clock.sleep_until(rt.clock.now() + 0.1)
    return get_stack(rt, tenant, stack_id)


def events_after(rt: Runtime, stack: StackView, after: int = 0,
                 limit: int | None = None) -> list[tuple[EventView, StackView]]:
    """One stack's events after the event id ``after`` (oldest first), each with its stack."""
    with rt.store.read() as tx:
        return [(e, stack) for e in tx.events(stack.id, after, limit)]


def project_events_after(rt: Runtime, tenant: str, after: int = 0,
                         limit: int | None = None,
                         known: dict[str, StackView] | None = None,
                         ) -> list[tuple[EventView, StackView]]:
    """The events of all the tenant's stacks after the event id ``after``, each with its stack
    (looked up in ``known`` first, a cache the caller keeps, which is filled in here)."""
    cache = known if known is not None else {}
    with rt.store.read() as tx:
        events = tx.project_events(tenant, after, limit)
        missing = {e.stack_id for e in events} - cache.keys()
        if missing:
            cache.update(tx.stacks_by_id(missing))
    return [(e, cache[e.stack_id]) for e in events if e.stack_id in cache]


# Operations (health and metrics) --------------------------------------------------------------

def ping_database(rt: Runtime) -> None:
    """Raises when the database does not answer a trivial query."""
    with rt.store.read() as tx:
        tx.ping()


def store_stats(rt: Runtime) -> tuple[dict[str, int], dict[tuple[str, str], int], int]:
    """Live stacks by ``ACTION_STATUS``, traversals by (action, state), and the orphans
    waiting to be removed: three cheap queries."""
    with rt.store.read() as tx:
        return tx.stack_counts(), tx.traversal_counts(), tx.count_orphans()


# Environment, export, abandon and mark-unhealthy -----------------------------------------------

_ENV_SECTIONS = ("parameters", "parameter_defaults", "resource_registry", "event_sinks",
                 "encrypted_param_names")


def merged_environment(content: TemplateContent | None) -> dict[str, Any]:
    """The stack's environments merged in order (later ones win), the stack's parameters on
    top, in Heat's shape: every section present."""
    env: dict[str, Any] = {"parameters": {}, "parameter_defaults": {},
                           "resource_registry": {"resources": {}}, "event_sinks": [],
                           "encrypted_param_names": []}
    if content is None:
        return env
    for doc in content.environments:
        if not isinstance(doc, Mapping):
            continue
        for section in _ENV_SECTIONS:
            value = doc.get(section)
            if isinstance(value, Mapping):
                if section == "resource_registry":
                    registry = env["resource_registry"]
                    for key, item in value.items():
                        if key == "resources" and isinstance(item, Mapping):
                            registry["resources"].update(item)
                        else:
                            registry[key] = item
                else:
                    env[section].update(value)
            elif isinstance(value, list):
                env[section].extend(v for v in value if v not in env[section])
    env["parameters"].update(content.parameters)
    return env


def _template_document(content: TemplateContent | None) -> dict[str, Any]:
    if content is None:
        return {}
    try:
        doc = load_document(content.text, "template")
    except TemplateError:
        return {}
    return dict(doc) if isinstance(doc, Mapping) else {}


def resource_metadata(content: TemplateContent | None, name: str) -> dict[str, Any]:
    """A resource's ``metadata`` as its template gives it (``{}`` when it has none)."""
    resources = _template_document(content).get("resources")
    definition = resources.get(name) if isinstance(resources, Mapping) else None
    value = definition.get("metadata") if isinstance(definition, Mapping) else None
    return dict(value) if isinstance(value, Mapping) else {}


def _current(records: Sequence[RecordView]) -> list[RecordView]:
    """One record per name: the one the stack uses (not one being replaced)."""
    best: dict[str, RecordView] = {}
    for r in records:
        held = best.get(r.name)
        if held is None or (r.replaced_by is None, r.id) > (held.replaced_by is None, held.id):
            best[r.name] = r
    return [best[n] for n in sorted(best)]


def _export(tx: Tx, stack: StackView) -> dict[str, Any]:
    content = tx.template(stack.template_id) if stack.template_id else None
    return {
        "id": stack.id, "name": stack.name, "action": stack.action, "status": stack.status,
        "project_id": stack.tenant, "stack_user_project_id": None, "tags": None,
        "template": _template_document(content), "environment": merged_environment(content),
        "files": dict(content.files) if content is not None else {},
        "resources": {r.name: {"name": r.name, "type": r.type, "action": r.action,
                               "status": r.status, "resource_id": r.physical_id,
                               "resource_data": {},
                               "metadata": resource_metadata(content, r.name)}
                      for r in _current(tx.records(stack.id))},
    }


def export_stack(rt: Runtime, tenant: str, name_or_id: str) -> dict[str, Any]:
    """Heat's abandon/export blob of a stack (what adopt takes back), changing nothing."""
    with rt.store.read() as tx:
        return _export(tx, _stack_or_404(tx, tenant, name_or_id))


def abandon_stack(rt: Runtime, tenant: str, name_or_id: str) -> dict[str, Any]:
    """Forget a stack, keeping its physical resources; returns its export blob.

    The stack's records are removed and the stack ends DELETE_COMPLETE (readable by id, not
    listed), as Heat's abandon does. Refused (Conflict) while a traversal is in progress: a
    step in flight could otherwise act on resources the blob does not show.
    """
    def abandon(tx: Tx) -> dict[str, Any]:
        stack = _locked_stack(tx, tenant, name_or_id)
        if stack.deleted_at is not None:
            raise NotFound(f"The Stack ({name_or_id}) could not be found.")
        if stack.status == "IN_PROGRESS":
            raise Conflict(f"Stack {stack.name} already has an action ({stack.action}) in "
                           "progress.")
        blob = _export(tx, stack)
        tx.supersede_traversals(stack.id, keep="")
        tx.forget_records(stack.id)
        reason = "Stack abandoned: its resources were kept"
        tx.update_stack(stack.id, action="DELETE", status="COMPLETE", status_reason=reason,
                        traversal_id=None, deleted_at=tx.now)
        tx.add_events(stack.id, None, stack.generation, [NewEvent(
            stack.name, stack.id, "OS::Heat::Stack", "DELETE", "COMPLETE", reason)])
        return blob

    return rt.store.transact(abandon)


def mark_resource_health(rt: Runtime, tenant: str, name_or_id: str, resource: str,
                         unhealthy: bool, reason: str = "") -> RecordView:
    """Mark a resource (by name or physical id) unhealthy: CHECK_FAILED, which the next
    update replaces; or healthy again: a CHECK_FAILED one becomes CHECK_COMPLETE.

    Conflict while a step holds the resource's lease.
    """
    def mark(tx: Tx) -> RecordView:
        stack = _locked_stack(tx, tenant, name_or_id)
        current = _current(tx.records(stack.id))
        found = [r for r in current if r.name == resource] or \
            [r for r in current if r.physical_id and r.physical_id == resource]
        if not found:
            raise NotFound(f"The Resource ({resource}) could not be found in Stack "
                           f"{stack.name}.")
        record = found[0]
        if unhealthy:
            status, why = "FAILED", reason or "state changed by resource_mark_unhealthy"
        elif record.action == "CHECK" and record.status == "FAILED":
            status, why = "COMPLETE", reason or "state changed by resource_mark_unhealthy"
        else:
            return record
        if not tx.set_record_state(record.id, "CHECK", status, why):
            raise Conflict(f"The Resource ({record.name}) is being worked on; try again.")
        tx.add_events(stack.id, None, stack.generation, [NewEvent(
            record.name, record.physical_id, record.type, "CHECK", status, why)])
        return tx.records_by_id([record.id])[record.id]

    return rt.store.transact(mark)
