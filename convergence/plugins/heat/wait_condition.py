"""``OS::Heat::WaitConditionHandle``, ``OS::Heat::UpdateWaitConditionHandle`` and
``OS::Heat::WaitCondition``: a barrier that something outside the engine (a server's boot
script, an operator's curl) lifts by signalling.

A handle hands out where to signal: ``endpoint`` (a signed URL of the engine's API,
``convergence.services.signals``), ``token`` (the same capability, for an ``X-Auth-Token``
header), ``curl_cli`` (a ready curl command to which ``--data-binary '{"status":
"SUCCESS"}'`` is appended) and ``signal`` (the map a client signals with). Its signals
(``status`` SUCCESS or FAILURE, ``reason``, ``data``, ``id``) are kept by the engine
(``convergence.services.resource_signals``). An ``UpdateWaitConditionHandle`` is replaced by
every stack update (a new handle, nothing received), so the wait conditions reading it wait
again.

A wait condition's ``handle`` is resolved within its own stack, as Heat's
(``resource_by_refid``): a reference (``get_resource``) to a handle of the same stack. A
``get_resource`` of another type is refused when the template is accepted; any other value
that is no handle of the stack (another stack's handle id, whoever's) fails the wait
condition naming the property, and nothing of that handle is read.

A wait condition *parks* until ``count`` SUCCESS signals (by distinct id) have come: each
signal wakes it to count again, and its ``timeout`` is the deadline its parked node is woken
at (``Progress.parked(wake_in=...)``): no worker, lease or poll while it waits. A FAILURE
signal fails it with the signals' reasons; the timeout fails it saying how many came.
Attribute ``data``: a JSON map of each signal's id to its data.

Callers: the engine's steps, through the registry.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import (
    DELETE,
    BackendFactory,
    PluginBase,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.heat.none import owner_uuid
from convergence.plugins.software_port import software_backend, software_of
from convergence.template.properties import (
    INTEGER,
    NUMBER,
    STRING,
    PropertySchema,
    TypeSchema,
)

SUCCESS, FAILURE = "SUCCESS", "FAILURE"
HANDLE_TYPES = ("OS::Heat::WaitConditionHandle", "OS::Heat::UpdateWaitConditionHandle")
TRANSPORTS = ("TOKEN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "NO_SIGNAL")


def curl_cli(endpoint: str, token: str) -> str:
    return (f"curl -i -X POST -H 'X-Auth-Token: {token}' -H 'Content-Type: application/json' "
            f"-H 'Accept: application/json' {shlex.quote(endpoint)}")


class WaitConditionHandle(PluginBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::WaitConditionHandle",
        properties={"signal_transport": PropertySchema(
            STRING, "How the handle is signalled (every transport but NO_SIGNAL is the "
                    "engine's signed URL).", default="TOKEN_SIGNAL",
            allowed_values=TRANSPORTS)},
        attributes=frozenset({"token", "endpoint", "curl_cli", "signal"}),
        description="Where a wait condition is signalled.",
    )
    backends: ClassVar[Mapping[str, BackendFactory]] = {"software": software_backend}

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        handle_id = owner_uuid(ctx.owner)
        if props.get("signal_transport") == "NO_SIGNAL":
            return Progress.finished(handle_id, {})
        backend = software_of(ctx)
        token = backend.token(ctx, "signal")
        endpoint = backend.signed_url(ctx, "signal")
        signal = {"alarm_url": endpoint} \
            if props.get("signal_transport") == "TEMP_URL_SIGNAL" else \
            {"endpoint": endpoint, "token": token}
        return Progress.finished(handle_id, {
            "token": token, "endpoint": endpoint, "curl_cli": curl_cli(endpoint, token),
            "signal": json.dumps(signal)})

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        return self.create(ctx, new)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        if physical_id is not None:
            software_of(ctx).forget_handle(physical_id)
        return Progress.finished(physical_id)


class UpdateWaitConditionHandle(WaitConditionHandle):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::UpdateWaitConditionHandle",
        properties=WaitConditionHandle.schema.properties,
        attributes=WaitConditionHandle.schema.attributes,
        description="A wait condition handle replaced by every stack update.",
        replaced_on_update=True,
    )

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return True


class WaitCondition(PluginBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::WaitCondition",
        properties={
            "handle": PropertySchema(STRING, "The handle (get_resource of a wait condition "
                                             "handle of this stack).", required=True,
                                     resource_types=HANDLE_TYPES),
            "timeout": PropertySchema(NUMBER, "Seconds to wait for the signals.",
                                      required=True, min=1, max=43200, update_allowed=True),
            "count": PropertySchema(INTEGER, "How many SUCCESS signals to wait for.",
                                    default=1, min=1, update_allowed=True),
        },
        attributes=frozenset({"data"}),
        description="Waits until its handle has been signalled count times.",
    )
    backends: ClassVar[Mapping[str, BackendFactory]] = {"software": software_backend}

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        return self._check(ctx, props, {"deadline": ctx.now() + float(props["timeout"])})

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        return self._check(ctx, new, {"deadline": ctx.now() + float(new["timeout"])})

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        if action == DELETE:
            return Progress.finished(physical_id)
        deadline = state.get("deadline")
        if deadline is None:
            state = {"deadline": ctx.now() + float(props["timeout"])}
        return self._check(ctx, props, state)

    def _check(self, ctx: PluginContext, props: Mapping[str, Any],
               state: Mapping[str, Any]) -> Progress:
        backend = software_of(ctx)
        handle = str(props["handle"])
        if not backend.stack_has(ctx, handle, HANDLE_TYPES):
            raise ResourceFailure(f"Property handle: {handle} is not a wait condition handle "
                                  "of this stack (get_resource of one)")
        signals = backend.handle_signals(handle)
        failures = [s for s in signals if s["status"] == FAILURE]
        if failures:
            raise ResourceFailure("WaitConditionFailure: " + "; ".join(
                str(s["reason"]) for s in failures))
        count = int(props.get("count", 1))
        if len(signals) >= count:
            data = {s["id"]: s["data"] for s in signals}
            return Progress.finished(owner_uuid(ctx.owner), {"data": json.dumps(data)})
        left = float(state["deadline"]) - ctx.now()
        if left <= 0:
            raise ResourceFailure(f"WaitConditionTimeout: {len(signals)} of {count} "
                                  f"received")
        return Progress.parked(dict(state), owner_uuid(ctx.owner), wake_in=left)
