"""``OS::Heat::SoftwareDeployment`` and ``OS::Heat::StructuredDeployment``: a config applied to
a server by the agent on it, and what the agent reported.

Each action the deployment's ``actions`` name (CREATE and UPDATE by default; DELETE, SUSPEND,
RESUME) derives a config from the source config (``config``: a config id) and the
deployment's ``input_values``, as Heat does: every declared input gets its value (or its
default), every other input value becomes an input of its own, and the ``deploy_*`` inputs
tell the agent the server, the action, the stack, the resource and how to signal
(``signal_transport``: ``CFN_SIGNAL``, ``TEMP_URL_SIGNAL`` and ``HEAT_SIGNAL`` give it a signed
URL of the engine's API, ``deploy_signal_id``, taking POST or PUT; ``NO_SIGNAL`` completes
without waiting). The derived config is a new one each time (a new id: the agent applies it
again), and the deployment (the resource's physical id) is re-pointed at it, IN_PROGRESS.

Then the resource *parks*: its node holds no worker, lease or timer until the agent's report
(``convergence.services.software.report``) wakes it. A report with ``deploy_status_code`` 0
completes it: ``deploy_stdout``, ``deploy_stderr``, ``deploy_status_code`` and each declared
output become its attributes, which other resources read (``get_attr``), so outputs chain to
inputs and a changed output re-runs exactly the deployments that read it. A non-zero code
fails it, the agent's stderr in the reason. An action not in ``actions`` applies nothing. A
changed property re-runs it in place (a new ``server``: applied on the new server);
``signal_transport`` is replaced.

``StructuredDeployment`` also replaces ``{get_input: name}`` (``input_key``) in a structured
config with the input's value; ``input_values_validate: STRICT`` fails on an input it lacks.

Callers: the engine's steps, through the registry; the deployment groups
(``convergence.plugins.heat.deployment_groups``) make one per server.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import (
    BackendFactory,
    PluginBase,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.software_port import SoftwareBackend, software_backend, software_of
from convergence.ports.views import SoftwareDeploymentView
from convergence.template.properties import LIST, MAP, STRING, PropertySchema, TypeSchema

CREATE, UPDATE, DELETE, SUSPEND, RESUME = "CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"
ACTIONS = (CREATE, UPDATE, DELETE, SUSPEND, RESUME)
CFN, TEMP_URL, HEAT, NO_SIGNAL, ZAQAR = ("CFN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL",
                                         "NO_SIGNAL", "ZAQAR_SIGNAL")
TRANSPORTS = (CFN, TEMP_URL, HEAT, NO_SIGNAL, ZAQAR)
IN_PROGRESS, COMPLETE, FAILED = "IN_PROGRESS", "COMPLETE", "FAILED"
OUTPUT_ATTRIBUTES = ("deploy_stdout", "deploy_stderr", "deploy_status_code")
NOT_WAITING = "Not waiting for outputs signal"


def deployment_properties() -> dict[str, PropertySchema]:
    return {
        "config": PropertySchema(STRING, "The id of the software config to apply.",
                                 update_allowed=True),
        "server": PropertySchema(STRING, "The id of the server to apply it to.",
                                 required=True, update_allowed=True),
        "input_values": PropertySchema(MAP, "The values of the config's inputs.", default={},
                                       update_allowed=True),
        "actions": PropertySchema(LIST, "The actions that apply the config.",
                                  default=[CREATE, UPDATE], update_allowed=True,
                                  item=PropertySchema(STRING, allowed_values=ACTIONS)),
        "signal_transport": PropertySchema(STRING, "How the server reports.", default=CFN,
                                           allowed_values=TRANSPORTS),
        "name": PropertySchema(STRING, "The derived config's name: the order in which a "
                                       "server's configs are applied.", update_allowed=True),
    }


def derived_inputs(config: Mapping[str, Any], values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The config's declared inputs with their values, and the other values as inputs."""
    given = dict(values)
    inputs = copy.deepcopy(list(config.get("inputs") or []))
    for item in inputs:
        item["value"] = given.pop(item["name"], item.get("default"))
    inputs.extend({"name": k, "type": "String", "value": v} for k, v in given.items())
    return inputs


def _input(name: str, description: str, value: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "type": "String", "value": value}


class SoftwareDeployment(PluginBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::SoftwareDeployment",
        properties=deployment_properties(),
        attributes=None,  # deploy_stdout, deploy_stderr, deploy_status_code, the outputs
        description="A software config applied to a server, until its agent reports.",
    )
    backends: ClassVar[Mapping[str, BackendFactory]] = {"software": software_backend}
    # A run in progress for an older definition is abandoned for the newer one: the agent
    # is given the new derived config, and a late report on the old one is ignored.
    preemptible: ClassVar[bool] = True

    # the derived config ---------------------------------------------------------------------
    def source(self, ctx: PluginContext, props: Mapping[str, Any]) -> dict[str, Any]:
        ref = props.get("config")
        if not ref:
            return {"name": "", "group": "Heat::Ungrouped", "config": "", "inputs": [],
                    "outputs": [], "options": {}}
        found = software_of(ctx).config(ctx, str(ref))
        if found is None:
            raise ResourceFailure(f"Software config {ref} not found")
        return {"id": found.id, "name": found.name, "group": found.group,
                "config": found.config, "inputs": found.inputs, "outputs": found.outputs,
                "options": found.options}

    def config_value(self, source: Mapping[str, Any], inputs: list[dict[str, Any]],
                     props: Mapping[str, Any]) -> Any:
        """The derived config's content (StructuredDeployment replaces its inputs in it)."""
        return source.get("config")

    def derive(self, ctx: PluginContext, props: Mapping[str, Any], action: str,
               backend: SoftwareBackend, deployment_id: str,
               config_id: str) -> dict[str, Any]:
        source = self.source(ctx, props)
        transport = str(props.get("signal_transport") or CFN)
        inputs = derived_inputs(source, props.get("input_values") or {})
        inputs += [
            _input("deploy_server_id", "ID of the server being deployed to",
                   props.get("server")),
            _input("deploy_action", "Name of the current action being deployed", action),
            _input("deploy_stack_id", "ID of the stack this deployment belongs to",
                   f"{ctx.stack_name}/{ctx.stack_id}"),
            _input("deploy_resource_name", "Name of this deployment resource in the stack",
                   ctx.resource_name),
            _input("deploy_signal_transport", "How the server should signal to heat with "
                   "the deployment output values.", transport),
        ]
        if transport != NO_SIGNAL:
            url = backend.signed_url(ctx, "deployment", d=deployment_id, c=config_id)
            inputs.append(_input("deploy_signal_id", "ID of signal to use for signaling "
                                 "output values", url))
            inputs.append(_input("deploy_signal_verb", "HTTP verb to use for signaling "
                                 "output values", "PUT" if transport == TEMP_URL else "POST"))
            if transport == HEAT:
                inputs.append(_input("deploy_auth_url", "URL of the orchestration API",
                                     backend.public_url))
                inputs.append(_input("deploy_project_id", "ID of the project the stack is "
                                     "in", ctx.stack_tenant))
        return {"name": props.get("name") or source.get("name") or ctx.resource_name,
                "group": source.get("group") or "Heat::Ungrouped",
                "config": self.config_value(source, inputs, props),
                "inputs": inputs, "outputs": list(source.get("outputs") or []),
                "options": dict(source.get("options") or {})}

    # actions --------------------------------------------------------------------------------
    def _apply(self, ctx: PluginContext, props: Mapping[str, Any], action: str) -> Progress:
        transport = props.get("signal_transport") or CFN
        if transport == ZAQAR:
            raise ResourceFailure("signal_transport ZAQAR_SIGNAL is not supported: this "
                                  "engine has no Zaqar; use CFN_SIGNAL, TEMP_URL_SIGNAL, "
                                  "HEAT_SIGNAL or NO_SIGNAL")
        backend = software_of(ctx)
        waits = transport != NO_SIGNAL
        dep = backend.deploy(
            ctx, server_id=str(props["server"]),
            derived=lambda d, c: self.derive(ctx, props, action, backend, d, c),
            input_values=props.get("input_values") or {}, action=action,
            status=IN_PROGRESS if waits else COMPLETE,
            reason="Deploy data available" if waits else NOT_WAITING)
        return self._progress(dep)

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        if CREATE not in (props.get("actions") or []):
            found = software_of(ctx).deployment(ctx)
            return Progress.finished(found.id if found else None, {})
        return self._apply(ctx, props, CREATE)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        found = software_of(ctx).deployment(ctx)
        # A create a newer definition took over (preempted) or that failed: it is still the
        # server's first deployment of this config.
        if found is not None and found.action == CREATE and found.status != COMPLETE and \
                CREATE in (new.get("actions") or []):
            return self._apply(ctx, new, CREATE)
        if UPDATE not in (new.get("actions") or []):
            return Progress.finished(physical_id, self.attributes(found) if found else {})
        return self._apply(ctx, new, UPDATE)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        backend = software_of(ctx)
        found = backend.deployment(ctx)
        if found is None:
            return Progress.finished(physical_id)
        if DELETE in (props.get("actions") or []) and \
                props.get("signal_transport", CFN) != NO_SIGNAL and found.action != DELETE:
            return self._apply(ctx, props, DELETE)
        return self._deleted(ctx, found, physical_id)

    def _deleted(self, ctx: PluginContext, found: SoftwareDeploymentView | None,
                 physical_id: str | None) -> Progress:
        if found is not None and found.status == IN_PROGRESS and found.action == DELETE:
            return Progress.parked({"config": found.config_id}, found.id)
        if found is not None and found.status == FAILED and found.action == DELETE:
            raise ResourceFailure(f"Deployment to server failed: {found.status_reason}")
        ctx.check_lease()
        software_of(ctx).forget_deployment(ctx)
        return Progress.finished(physical_id)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        software_of(ctx).forget_deployment(ctx)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        found = software_of(ctx).deployment(ctx)
        if action == DELETE:
            return self._deleted(ctx, found, physical_id)
        if found is None:
            if action == CREATE:
                return self.create(ctx, props)
            raise ResourceFailure(f"deployment {physical_id} is gone")
        return self._progress(found)

    def _progress(self, dep: SoftwareDeploymentView) -> Progress:
        if dep.status == IN_PROGRESS:
            return Progress.parked({"config": dep.config_id}, dep.id)
        if dep.status == FAILED:
            raise ResourceFailure(f"Deployment to server failed: {dep.status_reason}")
        return Progress.finished(dep.id, self.attributes(dep))

    @staticmethod
    def attributes(dep: SoftwareDeploymentView) -> dict[str, Any]:
        out: dict[str, Any] = {name: None for name in OUTPUT_ATTRIBUTES}
        out.update(dep.output_values)
        return out

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return (old.get("signal_transport") or CFN) != (new.get("signal_transport") or CFN)


def substitute(value: Any, key: str, inputs: Mapping[str, Any], strict: bool) -> Any:
    """``value`` with each ``{key: name}`` replaced by the input's value."""
    if isinstance(value, dict):
        if len(value) == 1 and key in value:
            name = value[key]
            if isinstance(name, str):
                if name not in inputs and strict:
                    raise ResourceFailure(f'Input "{name}" of the structured config is not '
                                          "given (input_values_validate is STRICT)")
                return inputs.get(name)
        return {k: substitute(v, key, inputs, strict) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, key, inputs, strict) for v in value]
    return value


class StructuredDeployment(SoftwareDeployment):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::StructuredDeployment",
        properties={
            **deployment_properties(),
            "input_key": PropertySchema(STRING, "The function name that takes an input in "
                                                "the structured config.", default="get_input"),
            "input_values_validate": PropertySchema(
                STRING, "STRICT: an input the config takes and is not given fails it.",
                default="LAX", allowed_values=("LAX", "STRICT")),
        },
        attributes=None,
        description="A structured config applied to a server, its inputs replaced in it.",
    )

    def config_value(self, source: Mapping[str, Any], inputs: list[dict[str, Any]],
                     props: Mapping[str, Any]) -> Any:
        values = {i["name"]: i.get("value") for i in inputs}
        return substitute(source.get("config"), str(props.get("input_key") or "get_input"),
                          values, props.get("input_values_validate") == "STRICT")
