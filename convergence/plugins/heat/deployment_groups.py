"""``OS::Heat::SoftwareDeploymentGroup`` and ``OS::Heat::StructuredDeploymentGroup``: one
deployment of the same config per server of a ``servers`` map, as a nested stack.

Each member is an ``OS::Heat::SoftwareDeployment`` (``StructuredDeployment``) named by its key
in ``servers``, applying ``config`` with ``input_values`` to that server; a server added to
the map gets a deployment, one taken out loses its own. A change of the deployments' inputs
rolls through the servers in batches when ``update_policy.rolling_update`` says so
(``max_batch_size``, ``pause_time``: the group stages of ``convergence.plugins.heat.groups``),
each deployment parking until its agent reports.

Attributes, maps by server key: ``deploy_stdouts``, ``deploy_stderrs``,
``deploy_status_codes``, and any output of the config by its name.

Callers: the engine's steps, through the registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from convergence.plugins.heat.groups import REFS, REFS_MAP, REMOVED, Batches, GroupBase
from convergence.plugins.heat.nested import STACK_ID, STACK_NAME
from convergence.plugins.heat.software_deployment import deployment_properties
from convergence.template.nesting import UPDATE_POLICY
from convergence.template.properties import MAP, STRING, PropertySchema, TypeSchema

PLURALS = {"deploy_stdouts": "deploy_stdout", "deploy_stderrs": "deploy_stderr",
           "deploy_status_codes": "deploy_status_code"}
MEMBER_KEYS = ("config", "input_values", "actions", "signal_transport", "name")


def group_properties(structured: bool) -> dict[str, PropertySchema]:
    props = {k: v for k, v in deployment_properties().items() if k != "server"}
    props["servers"] = PropertySchema(MAP, "The servers to deploy to: key -> server id.",
                                      required=True, update_allowed=True)
    if structured:
        props["input_key"] = PropertySchema(STRING, "The function name that takes an input.",
                                            default="get_input")
        props["input_values_validate"] = PropertySchema(
            STRING, "STRICT: an input not given fails.", default="LAX",
            allowed_values=("LAX", "STRICT"))
    return props


class SoftwareDeploymentGroup(GroupBase):
    member_type: ClassVar[str] = "OS::Heat::SoftwareDeployment"
    member_keys: ClassVar[tuple[str, ...]] = MEMBER_KEYS
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::SoftwareDeploymentGroup",
        properties=group_properties(False),
        attributes=None,
        description="One software deployment per server of a map, as a nested stack.",
        generates_stack=True,
    )

    def membership(self, props: Mapping[str, Any], outputs: Mapping[str, Any],
                   present: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
        return sorted(str(k) for k in (props.get("servers") or {})), []

    def member(self, props: Mapping[str, Any], name: str) -> dict[str, Any]:
        properties = {k: props[k] for k in self.member_keys if props.get(k) is not None}
        properties["server"] = (props.get("servers") or {})[name]
        return {"type": self.member_type, "properties": properties}

    def rolling(self, props: Mapping[str, Any], existing: int) -> Batches | None:
        policy = (props.get(UPDATE_POLICY) or {}).get("rolling_update")
        if not isinstance(policy, Mapping):
            return None
        return Batches(int(policy.get("max_batch_size", 1) or 1),
                       float(policy.get("pause_time", 0) or 0))

    def member_outputs(self, names: list[str],
                       paths: Sequence[Sequence[Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path in paths:
            attribute = str(path[0])
            if attribute in (REFS, REFS_MAP, REMOVED, STACK_ID, STACK_NAME):
                continue
            inner = PLURALS.get(attribute, attribute)
            out[attribute] = {"value": {n: {"get_attr": [n, inner]} for n in names}}
        return out


class StructuredDeploymentGroup(SoftwareDeploymentGroup):
    member_type: ClassVar[str] = "OS::Heat::StructuredDeployment"
    member_keys: ClassVar[tuple[str, ...]] = (*MEMBER_KEYS, "input_key",
                                               "input_values_validate")
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::StructuredDeploymentGroup",
        properties=group_properties(True),
        attributes=None,
        description="One structured deployment per server of a map, as a nested stack.",
        generates_stack=True,
    )
