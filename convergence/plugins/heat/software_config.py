"""Software configs as resources: ``OS::Heat::SoftwareConfig``, ``OS::Heat::StructuredConfig``,
``OS::Heat::CloudConfig`` and ``OS::Heat::MultipartMime``.

Each keeps one immutable config in the engine's software configuration (the
:class:`~convergence.plugins.software_port.SoftwareBackend`, the rows Heat's
``software_configs`` API serves): its id is the resource's physical id and reference
(``get_resource``), what deployments and servers' ``user_data`` name. Configs never change:
every property change replaces the resource (a new config), and a delete deletes the row;
deployments keep their own derived copies, so deleting a config does not touch what was
deployed. Attribute ``config``: the config's content.

- ``SoftwareConfig``: ``group`` (``script``, ``puppet``, ``ansible``... default
  ``Heat::Ungrouped``), ``config`` text, ``inputs``, ``outputs``, ``options``;
- ``StructuredConfig``: the same, with ``config`` a map (``get_input`` in it is replaced by
  ``OS::Heat::StructuredDeployment`` with the deployment's input values);
- ``CloudConfig``: ``cloud_config``, a map written as a ``#cloud-config`` document;
- ``MultipartMime``: ``parts`` (each a config id or text, ``filename``, ``type`` text or
  multipart, ``subtype``) assembled into one MIME multipart message.

Callers: the engine's steps, through the registry (entry points of those names).
"""

from __future__ import annotations

import email
from collections.abc import Mapping
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any, ClassVar

import yaml

from convergence.plugins.base import (
    BackendFactory,
    PluginBase,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.software_port import software_backend, software_of
from convergence.template.properties import (
    BOOLEAN,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

DEFAULT_GROUP = "Heat::Ungrouped"
INPUT_TYPES = ("String", "Number", "CommaDelimitedList", "Json", "Boolean")

INPUT = PropertySchema(MAP, "A declared input.", schema={
    "name": PropertySchema(STRING, "The input's name.", required=True),
    "description": PropertySchema(STRING, "What it is."),
    "type": PropertySchema(STRING, "Its type.", default="String", allowed_values=INPUT_TYPES),
    "default": PropertySchema("Any", "Its value when a deployment gives none."),
    "replace_on_change": PropertySchema(BOOLEAN, "A change of its value replaces the "
                                                 "deployment.", default=False),
})
OUTPUT = PropertySchema(MAP, "A declared output.", schema={
    "name": PropertySchema(STRING, "The output's name.", required=True),
    "description": PropertySchema(STRING, "What it is."),
    "type": PropertySchema(STRING, "Its type.", default="String", allowed_values=INPUT_TYPES),
    "error_output": PropertySchema(BOOLEAN, "A value in it fails the deployment.",
                                   default=False),
})


def _common(config: PropertySchema) -> dict[str, PropertySchema]:
    return {
        "group": PropertySchema(STRING, "What applies the config on the server (script, "
                                        "puppet, ansible, ...).", default=DEFAULT_GROUP),
        "config": config,
        "options": PropertySchema(MAP, "Options for the group's tool."),
        "inputs": PropertySchema(LIST, "The inputs the config takes.", item=INPUT),
        "outputs": PropertySchema(LIST, "The outputs the config reports.", item=OUTPUT),
    }


class ConfigBase(PluginBase):
    """A resource that keeps one software config (see the module)."""

    backends: ClassVar[Mapping[str, BackendFactory]] = {"software": software_backend}

    def content(self, ctx: PluginContext, props: Mapping[str, Any]) -> dict[str, Any]:
        """The config to keep (``name, group, config, inputs, outputs, options``)."""
        return {"name": ctx.resource_name, "group": props.get("group") or DEFAULT_GROUP,
                "config": props.get("config"), "inputs": list(props.get("inputs") or []),
                "outputs": list(props.get("outputs") or []),
                "options": dict(props.get("options") or {})}

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        ctx.check_lease()
        made = software_of(ctx).make_config(ctx, self.content(ctx, props))
        return Progress.finished(made.id, {"config": made.config})

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        return self.create(ctx, new)  # only when nothing changed: configs are replaced

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        ctx.check_lease()
        software_of(ctx).delete_configs(ctx)
        return Progress.finished(physical_id)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        software_of(ctx).delete_configs(ctx)

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return dict(old) != dict(new)  # immutable


class SoftwareConfig(ConfigBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::SoftwareConfig",
        properties=_common(PropertySchema(STRING, "The configuration script or document.")),
        attributes=frozenset({"config"}),
        description="A software configuration a deployment applies to servers.",
    )


class StructuredConfig(ConfigBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::StructuredConfig",
        # A map in Heat's schema; real templates give lists as well (chef's run lists).
        properties=_common(PropertySchema("Any", "The configuration as a structure, a map "
                                                 "or a list (get_input in it takes a "
                                                 "deployment's input).")),
        attributes=frozenset({"config"}),
        description="A structured software configuration.",
    )


def cloud_config_text(value: Mapping[str, Any]) -> str:
    return "#cloud-config\n" + yaml.safe_dump(dict(value), default_flow_style=False)


class CloudConfig(ConfigBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::CloudConfig",
        properties={"cloud_config": PropertySchema(MAP, "The cloud-init cloud-config "
                                                        "document.", default={})},
        attributes=frozenset({"config"}),
        description="A cloud-init cloud-config, for a server's user_data or a multipart.",
    )

    def content(self, ctx: PluginContext, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": ctx.resource_name, "group": DEFAULT_GROUP,
                "config": cloud_config_text(props.get("cloud_config") or {}),
                "inputs": [], "outputs": [], "options": {}}


PART = PropertySchema(MAP, "One part of the message.", schema={
    "config": PropertySchema(STRING, "A software config's id, or the part's text.",
                             required=True),
    "filename": PropertySchema(STRING, "The part's file name."),
    "type": PropertySchema(STRING, "text, or multipart (a config that is a multipart "
                                   "message itself, whose parts are added).", default="text",
                           allowed_values=("text", "multipart")),
    "subtype": PropertySchema(STRING, "The MIME subtype of a text part."),
})


class MultipartMime(ConfigBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::MultipartMime",
        properties={
            "parts": PropertySchema(LIST, "The parts, in order.", default=[], item=PART),
            "group": PropertySchema(STRING, "The group of the config made.",
                                    default=DEFAULT_GROUP),
        },
        attributes=frozenset({"config"}),
        description="Configs assembled into one MIME multipart message.",
    )

    def content(self, ctx: PluginContext, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": ctx.resource_name, "group": props.get("group") or DEFAULT_GROUP,
                "config": self.message(ctx, list(props.get("parts") or [])),
                "inputs": [], "outputs": [], "options": {}}

    @staticmethod
    def message(ctx: PluginContext, parts: list[Mapping[str, Any]]) -> str:
        whole = MIMEMultipart()
        backend = software_of(ctx)
        for part in parts:
            ref = str(part.get("config") or "")
            found = backend.config(ctx, ref) if ref else None
            text = found.config if found is not None else ref
            if not isinstance(text, str):
                text = yaml.safe_dump(text, default_flow_style=False)
            if part.get("type") == "multipart":
                inner = email.message_from_string(text)
                if not inner.is_multipart():
                    raise ResourceFailure(f"part {ref!r} is not a multipart message")
                for sub in inner.get_payload():
                    if isinstance(sub, email.message.Message):
                        whole.attach(sub)
                continue
            subtype = part.get("subtype") or ("cloud-config" if text.startswith(
                "#cloud-config") else "x-shellscript" if text.startswith("#!") else "plain")
            mime = MIMEText(text, str(subtype), "utf-8" if not text.isascii() else "us-ascii")
            if part.get("filename"):
                mime.add_header("Content-Disposition", "attachment",
                                filename=str(part["filename"]))
            whole.attach(mime)
        return whole.as_string()
