"""Software configuration: Heat's software configs and deployments, and what servers' agents
report on them.

Two sides share the rows of ``convergence.store.software``:

- The API's use cases (``convergence.api.software``): configs are made, read, listed and
  deleted (immutable); deployments are made, read, listed (``server_id``), changed and
  deleted; ``metadata/{server_id}`` lists the derived configs of a server's deployments in
  the order their agent applies them (by name), which is what an agent polls.
- :class:`SoftwareService`, the plugins' :class:`~convergence.plugins.software_port.
  SoftwareBackend` (``convergence.runtime`` builds one per runtime and attaches it): the
  configs a resource keeps, the deployment a deployment resource re-applies in place (each
  application a new derived config, so the agent runs it again), handles' signals and the
  signed URLs a resource hands out (``convergence.services.signals``).

:func:`report` is an agent's report (a signal to the deployment resource, its signed URL, or
``PUT software_deployments/{id}`` with a status): as Heat does, a non-zero
``deploy_status_code`` or a non-empty ``error_output`` fails the deployment, and the output
values are kept; then, in the same transaction, the resource's node of its stack's current
traversal is woken (it parked, holding nothing, while the agent worked) and a SIGNAL event
says what came. A report for a derived config the deployment no longer applies (a late one
from a run an update replaced) or for a deployment not in progress changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from convergence.engine.nesting import wake_records
from convergence.errors import InvalidParameter, NotFound
from convergence.heat_fields import iso
from convergence.plugins.base import PluginContext, RetryLater
from convergence.ports.store import Tx
from convergence.ports.views import NewEvent, SoftwareConfigView, SoftwareDeploymentView
from convergence.ports.work import Work
from convergence.services import signals
from convergence.services.context import Attached
from convergence.services.stacks import send

if TYPE_CHECKING:
    from convergence.services.context import Runtime

IN_PROGRESS, COMPLETE, FAILED = "IN_PROGRESS", "COMPLETE", "FAILED"
STATUSES = (IN_PROGRESS, COMPLETE, FAILED)
STDOUT, STDERR, STATUS_CODE = "deploy_stdout", "deploy_stderr", "deploy_status_code"
RESERVED_OUTPUTS = (STDOUT, STDERR, STATUS_CODE)
DEFAULT_GROUP = "Heat::Ungrouped"
DERIVED = "/derived"  # the owner suffix of a deployment's derived configs
STDERR_IN_REASON = 2000  # characters of the agent's stderr a failure's reason keeps


# Shapes ---------------------------------------------------------------------------------------

def config_dict(c: SoftwareConfigView) -> dict[str, Any]:
    """A config as Heat's API answers it."""
    return {"id": c.id, "name": c.name, "group": c.group, "config": c.config,
            "inputs": c.inputs, "outputs": c.outputs, "options": c.options,
            "creation_time": iso(c.created_at), "project": c.tenant}


def deployment_dict(d: SoftwareDeploymentView) -> dict[str, Any]:
    """A deployment as Heat's API answers it."""
    return {"id": d.id, "config_id": d.config_id, "server_id": d.server_id,
            "input_values": d.input_values, "output_values": d.output_values,
            "action": d.action, "status": d.status, "status_reason": d.status_reason,
            "creation_time": iso(d.created_at), "updated_time": iso(d.updated_at),
            "stack_user_project_id": d.stack_user_project_id}


def metadata_item(c: SoftwareConfigView, d: SoftwareDeploymentView) -> dict[str, Any]:
    """A deployment's config as its server's agent gets it."""
    return {**config_dict(c), "updated_time": iso(d.updated_at or d.created_at)}


# Checking what a caller sent ------------------------------------------------------------------

def _text(body: Mapping[str, Any], key: str, default: str | None = None,
          where: str = "software_config") -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise InvalidParameter("body", f"{where}.{key} must be a string.")
    return value


def _list_of_maps(body: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = body.get(key)
    value = [] if value is None else value
    if not isinstance(value, list) or not all(isinstance(v, dict) and isinstance(
            v.get("name"), str) for v in value):
        raise InvalidParameter("body", f"software_config.{key} must be a list of maps, each with a "
                            f"name.")
    return [dict(v) for v in value]


def config_from_body(tenant: str, body: Mapping[str, Any], now: float) -> SoftwareConfigView:
    """A new config from a caller's body (``name, group, config, inputs, outputs, options``);
    InvalidParameter naming the field when it is wrong."""
    unknown = sorted(set(body) - {"name", "group", "config", "inputs", "outputs", "options"})
    if unknown:
        raise InvalidParameter("body", f"software_config: unknown field {unknown[0]!r}.")
    options = body.get("options")
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise InvalidParameter("body", "software_config.options must be a map.")
    config = body.get("config")
    if config is not None and not isinstance(config, (str, dict, list)):
        raise InvalidParameter("body", "software_config.config must be a string or a structure.")
    return SoftwareConfigView(
        str(uuid.uuid4()), tenant, _text(body, "name", ""), _text(body, "group", DEFAULT_GROUP),
        config, _list_of_maps(body, "inputs"), _list_of_maps(body, "outputs"), dict(options),
        now)


# The API's use cases ---------------------------------------------------------------------------

def create_config(rt: Runtime, tenant: str, body: Mapping[str, Any]) -> SoftwareConfigView:
    def made(tx: Tx) -> SoftwareConfigView:
        return tx.insert_config(config_from_body(tenant, body, tx.now))

    return rt.store.transact(made)


def show_config(rt: Runtime, tenant: str, config_id: str) -> SoftwareConfigView:
    with rt.store.read() as tx:
        found = tx.software_config(config_id, tenant)
    if found is None:
        raise NotFound(f"Software config with id {config_id} not found")
    return found


def list_configs(rt: Runtime, tenant: str, limit: int | None = None,
                 marker: str | None = None) -> list[SoftwareConfigView]:
    with rt.store.read() as tx:
        return tx.software_configs(tenant, limit, marker)


def delete_config(rt: Runtime, tenant: str, config_id: str) -> None:
    def gone(tx: Tx) -> None:
        if tx.software_config(config_id, tenant) is None:
            raise NotFound(f"Software config with id {config_id} not found")
        tx.delete_config(config_id)

    rt.store.transact(gone)


# What a caller may send of a deployment, besides its fields: an id, which Heat's API takes
# from nobody (a new deployment always gets a new one) and which is ignored here as there.
IGNORED_DEPLOYMENT_KEYS = frozenset({"id", "deployment_id"})


def _deployment_fields(body: Mapping[str, Any], *, new: bool) -> dict[str, Any]:
    known = {"config_id", "server_id", "input_values", "output_values", "action", "status",
             "status_reason", "stack_user_project_id"}
    unknown = sorted(set(body) - known - IGNORED_DEPLOYMENT_KEYS)
    if unknown:
        raise InvalidParameter("body", f"software_deployment: unknown field {unknown[0]!r}.")
    fields: dict[str, Any] = {}
    for key in ("config_id", "server_id", "action", "status", "status_reason",
                "stack_user_project_id"):
        if key in body and body[key] is not None:
            fields[key] = _text(body, key, where="software_deployment")
    for key in ("input_values", "output_values"):
        if key in body and body[key] is not None:
            if not isinstance(body[key], dict):
                raise InvalidParameter("body", f"software_deployment.{key} must be a map.")
            fields[key] = dict(body[key])
    if "status" in fields and fields["status"] not in STATUSES:
        raise InvalidParameter("body", f"software_deployment.status must be one of "
                            f"{', '.join(STATUSES)}.")
    if new:
        for key in ("config_id", "server_id"):
            if not fields.get(key):
                raise InvalidParameter("body", f"software_deployment.{key} is required.")
    return fields


def create_deployment(rt: Runtime, tenant: str,
                      body: Mapping[str, Any]) -> SoftwareDeploymentView:
    """A new deployment of the caller's config, under a new id whatever id the body names:
    as in Heat, the id is the engine's to give. Taking the caller's would let one tenant
    learn that another's deployment has that id (the insert refused), or collide with it."""
    fields = _deployment_fields(body, new=True)

    def made(tx: Tx) -> SoftwareDeploymentView:
        if tx.software_config(fields["config_id"], tenant) is None:
            raise NotFound(f"Software config with id {fields['config_id']} not found")
        return tx.insert_deployment(SoftwareDeploymentView(
            str(uuid.uuid4()), tenant, fields["config_id"],
            fields["server_id"], fields.get("action", "INIT"),
            fields.get("status", COMPLETE), fields.get("status_reason", ""),
            fields.get("input_values", {}), fields.get("output_values", {}), tx.now, tx.now,
            fields.get("stack_user_project_id")))

    return rt.store.transact(made)


def show_deployment(rt: Runtime, tenant: str, deployment_id: str) -> SoftwareDeploymentView:
    with rt.store.read() as tx:
        found = tx.software_deployment(deployment_id, tenant)
    if found is None:
        raise NotFound(f"Deployment with id {deployment_id} not found")
    return found


def list_deployments(rt: Runtime, tenant: str,
                     server_id: str | None = None) -> list[SoftwareDeploymentView]:
    with rt.store.read() as tx:
        return tx.software_deployments(tenant, server_id)


def update_deployment(rt: Runtime, tenant: str, deployment_id: str,
                      body: Mapping[str, Any]) -> SoftwareDeploymentView:
    """Change a deployment (Heat's PUT). A status that ends one in progress is its agent's
    report: its resource, if a stack's, goes on."""
    fields = _deployment_fields(body, new=False)
    wake: list[Work] = []

    def changed(tx: Tx) -> SoftwareDeploymentView:
        found = tx.software_deployment(deployment_id, tenant, lock=True)
        if found is None:
            raise NotFound(f"Deployment with id {deployment_id} not found")
        if "config_id" in fields and tx.software_config(fields["config_id"], tenant) is None:
            raise NotFound(f"Software config with id {fields['config_id']} not found")
        tx.update_deployment(deployment_id, **fields)
        ended = found.status == IN_PROGRESS and fields.get("status") in (COMPLETE, FAILED)
        if ended and found.owner is not None:
            reason = fields.get("status_reason") or f"deployment {fields['status'].lower()}"
            wake.extend(_woken(rt, tx, found, f"Signal: {reason}"))
        return replace(found, updated_at=tx.now, **fields)

    updated = rt.store.transact(changed)
    send(rt, wake)
    return updated


def delete_deployment(rt: Runtime, tenant: str, deployment_id: str) -> None:
    def gone(tx: Tx) -> None:
        if tx.software_deployment(deployment_id, tenant) is None:
            raise NotFound(f"Deployment with id {deployment_id} not found")
        tx.delete_deployment(deployment_id)

    rt.store.transact(gone)


def server_metadata(rt: Runtime, tenant: str, server_id: str) -> list[dict[str, Any]]:
    """The configs of a server's deployments, by name (the order its agent applies them)."""
    with rt.store.read() as tx:
        deployments = tx.software_deployments(tenant, server_id)
        configs = tx.software_configs_by_id(d.config_id for d in deployments)
    items = [metadata_item(configs[d.config_id], d) for d in deployments
             if d.config_id in configs]
    return sorted(items, key=lambda c: (c["name"] or "", c["creation_time"] or ""))


# Reports -------------------------------------------------------------------------------------

def outcome(details: Mapping[str, Any],
            outputs: list[dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
    """What a report says, as Heat reads it: (status, reason, output values)."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for output in outputs:
        name = str(output.get("name"))
        if name in details:
            values[name] = details[name]
            if output.get("error_output") and details[name]:
                problems.append(f"{name} : {details[name]}")
    for name in RESERVED_OUTPUTS:
        if name in details:
            values[name] = details[name]
    code = details.get(STATUS_CODE)
    if code not in (None, "", 0, "0"):
        problems.insert(0, f"{STATUS_CODE} : Deployment exited with non-zero status code: "
                           f"{code}")
        stderr = str(details.get(STDERR) or "").strip()
        if stderr:
            problems.append(f"{STDERR} : {stderr[-STDERR_IN_REASON:]}")
    if problems:
        return FAILED, ", ".join(problems), values
    return COMPLETE, "Outputs received", values


def report(rt: Runtime, deployment_id: str, details: Mapping[str, Any], *,
           tenant: str | None = None, config_id: str | None = None) -> bool:
    """An agent's report on a deployment (see the module); whether it was taken."""
    if not isinstance(details, Mapping):
        raise InvalidParameter("body", "A deployment's signal must be a JSON object.")
    wake: list[Work] = []

    def taken(tx: Tx) -> bool:
        found = tx.software_deployment(deployment_id, tenant, lock=True)
        if found is None:
            raise NotFound(f"Deployment with id {deployment_id} not found")
        if found.status != IN_PROGRESS or (config_id is not None
                                           and config_id != found.config_id):
            return False  # a late report of a run that is over, or was replaced
        config = tx.software_config(found.config_id)
        status, reason, values = outcome(details, config.outputs if config else [])
        tx.update_deployment(deployment_id, status=status, status_reason=reason,
                             output_values=values)
        said = "succeeded" if status == COMPLETE else \
            f"failed ({values.get(STATUS_CODE, 'error output')})"
        wake.extend(_woken(rt, tx, found, f"Signal: deployment {deployment_id} {said}"))
        return True

    done = rt.store.transact(taken)
    send(rt, wake)
    if done:
        rt.engine.ctx.tell_observers()
    return done


def _woken(rt: Runtime, tx: Tx, dep: SoftwareDeploymentView, reason: str) -> list[Work]:
    """The deployment's resource told (an event) and its node of the current traversal
    woken: the work that steps it."""
    if dep.owner is None or dep.stack_id is None:
        return []
    stack = tx.stack(dep.stack_id)
    record_id = int(dep.owner.rsplit("/", 1)[1])
    record = tx.records_by_id([record_id]).get(record_id)
    if stack is None or record is None:
        return []
    tx.add_events(stack.id, stack.traversal_id, stack.generation, [NewEvent(
        record.name, record.physical_id, record.type, "SIGNAL", "COMPLETE", reason)])
    return wake_records(tx, stack, [record_id], rt.settings.batch_size)


# The plugins' backend ------------------------------------------------------------------------

class SoftwareService(Attached):
    """The plugins' :class:`~convergence.plugins.software_port.SoftwareBackend`."""

    @property
    def public_url(self) -> str:
        return self.rt.settings.public_url

    # configs
    def make_config(self, ctx: PluginContext, content: Mapping[str, Any]) -> SoftwareConfigView:
        def made(tx: Tx) -> SoftwareConfigView:
            found = tx.configs_of_owner(ctx.owner)
            if found:
                return found[0]  # an earlier attempt's
            config = config_from_body(ctx.stack_tenant, content, tx.now)
            return tx.insert_config(replace(config, owner=ctx.owner))

        return self.rt.store.transact(made)

    def config(self, ctx: PluginContext, config_id: str) -> SoftwareConfigView | None:
        with self.rt.store.read() as tx:
            return tx.software_config(config_id, ctx.stack_tenant)

    def delete_configs(self, ctx: PluginContext) -> None:
        def gone(tx: Tx) -> None:
            for config in tx.configs_of_owner(ctx.owner):
                tx.delete_config(config.id)

        self.rt.store.transact(gone)

    # deployments
    def deployment(self, ctx: PluginContext) -> SoftwareDeploymentView | None:
        with self.rt.store.read() as tx:
            return tx.deployment_of_owner(ctx.owner)

    def deploy(self, ctx: PluginContext, *, server_id: str,
               derived: Callable[[str, str], Mapping[str, Any]],
               input_values: Mapping[str, Any], action: str, status: str,
               reason: str) -> SoftwareDeploymentView:
        """Apply a new derived config (what ``derived`` makes of the deployment's id and the
        new config's id) with the deployment of ``ctx``'s record, made if it has none; the
        config it applied before is deleted."""
        with self.rt.store.read() as tx:
            before = tx.deployment_of_owner(ctx.owner)
        dep_id = before.id if before is not None else str(uuid.uuid4())
        config_id = str(uuid.uuid4())
        # Made with no transaction open: it may read configs and the signing key.
        content = derived(dep_id, config_id)

        def applied(tx: Tx) -> SoftwareDeploymentView:
            found = tx.deployment_of_owner(ctx.owner)
            if (found.id if found is not None else dep_id) != dep_id:
                raise RetryLater("the deployment changed meanwhile", 0.0)
            config = replace(config_from_body(ctx.stack_tenant, content, tx.now),
                             id=config_id, owner=ctx.owner + DERIVED)
            tx.insert_config(config)
            values = {"config_id": config_id, "server_id": server_id, "action": action,
                      "status": status, "status_reason": reason,
                      "input_values": dict(input_values), "output_values": {}}
            if found is None:
                return tx.insert_deployment(SoftwareDeploymentView(
                    dep_id, ctx.stack_tenant, config_id, server_id, action, status, reason,
                    dict(input_values), {}, tx.now, tx.now, None, ctx.stack_id,
                    ctx.resource_name, ctx.owner))
            tx.update_deployment(dep_id, **values)
            old = tx.software_config(found.config_id)
            if old is not None and old.owner == ctx.owner + DERIVED:
                tx.delete_config(old.id)
            return replace(found, updated_at=tx.now, **values)  # type: ignore[arg-type]

        ctx.check_lease()
        return self.rt.store.transact(applied)

    def forget_deployment(self, ctx: PluginContext) -> None:
        def gone(tx: Tx) -> None:
            found = tx.deployment_of_owner(ctx.owner)
            if found is not None:
                tx.delete_deployment(found.id)
            for config in tx.configs_of_owner(ctx.owner + DERIVED):
                tx.delete_config(config.id)

        self.rt.store.transact(gone)

    # signed URLs: bound to ``ctx``'s record (the resource's version), not to its name
    def token(self, ctx: PluginContext, kind: str, **claims: str) -> str:
        return signals.sign(signals.signing_key(self.rt), signals.claims_for(
            kind, ctx.stack_tenant, ctx.stack_id, ctx.resource_name,
            record=int(ctx.owner.rsplit("/", 1)[1]), **claims))

    def signed_url(self, ctx: PluginContext, kind: str, **claims: str) -> str:
        return signals.url(self.public_url, self.token(ctx, kind, **claims))

    # wait condition handles
    def stack_has(self, ctx: PluginContext, physical_id: str, types: tuple[str, ...]) -> bool:
        with self.rt.store.read() as tx:
            return tx.stack_has_resource(ctx.stack_id, physical_id, types)

    def handle_signals(self, handle_id: str) -> list[dict[str, Any]]:
        with self.rt.store.read() as tx:
            return tx.handle_signals(handle_id)

    def forget_handle(self, handle_id: str) -> None:
        def gone(tx: Tx) -> None:
            tx.forget_handle_signals(handle_id)

        self.rt.store.transact(gone)


def resource_metadata(rt: Runtime, tenant: str, stack_id: str, resource: str,
                      record_id: int | None = None) -> list[dict[str, Any]]:
    """The deployments of the server a stack's resource is (its current version's), for the
    agent of that server polling its signed metadata URL; ``record_id``: the version the URL
    was made for, NotFound when it is not the current one any more (replaced)."""
    with rt.store.read() as tx:
        stack = tx.stack(stack_id)
        if stack is None or stack.tenant != tenant:
            raise NotFound("No such server.")
        heads = tx.heads(stack.id, [resource]).values()
        if record_id is not None and all(r.id != record_id for r in heads):
            raise NotFound("No such server.")
        found = [r for r in heads if r.physical_id is not None]
    if not found:
        return []
    return server_metadata(rt, tenant, str(found[0].physical_id))
