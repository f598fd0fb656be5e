"""``OS::Neutron::SecurityGroup`` and ``OS::Neutron::SecurityGroupRule``: packet filters for
ports, as a group with its rules or as rules added to a group one by one.

Callers: the registry (entry points ``OS::Neutron::SecurityGroup`` and
``OS::Neutron::SecurityGroupRule``); the engine's steps call them through the plugin port.
Schemas and what updates in place are Heat's.

A group carries the record's key as a Neutron tag; one the template names not is named as Heat
names it. Its ``rules`` are made to match the template's, level-based: the group's rules are
read, the ones the old template gave and the new one does not are deleted and the missing ones
made, so a step interrupted half-way is finished by the next; rules no template of the group
gave (an ``OS::Neutron::SecurityGroupRule``'s) are left alone. As Heat does, Neutron's default
egress rules (anything out, IPv4 and IPv6) stay while the template gives no egress rule of its
own and go when it gives one. A rule in ``remote_group_id`` mode with no group names the group
itself.

Neutron takes no tags on rules: a ``SecurityGroupRule`` finds what an interrupted attempt made
as the group's rule identical to the template's, and adopts it. Every property replaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import (
    CREATE,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.openstack.errors import translated
from convergence.plugins.openstack.names import physical_name
from convergence.plugins.openstack.neutron_net import tagged, with_tags
from convergence.plugins.openstack.neutron_port import neutron_type, resolve
from convergence.plugins.openstack.resource import OpenStackResource, owner_tag
from convergence.template.properties import (
    INTEGER,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

# What makes two rules the same rule, in Neutron's words.
RULE_KEYS = ("direction", "ethertype", "protocol", "port_range_min", "port_range_max",
             "remote_ip_prefix", "remote_group_id")
DEFAULT_EGRESS = ({"direction": "egress", "ethertype": "IPv4"},
                  {"direction": "egress", "ethertype": "IPv6"})
PROTOCOLS = ("ah", "dccp", "egp", "esp", "gre", "icmp", "icmpv6", "igmp", "ipv6-encap",
             "ipv6-frag", "ipv6-icmp", "ipv6-nonxt", "ipv6-opts", "ipv6-route", "ospf", "pgm",
             "rsvp", "sctp", "tcp", "udp", "udplite", "vrrp", *(str(n) for n in range(256)))
Rule = tuple[Any, ...]  # a rule's values of RULE_KEYS


def rule_key(rule: Mapping[str, Any]) -> Rule:
    """A rule (Neutron's fields) as the values that make it that rule."""
    out: list[Any] = []
    for key in RULE_KEYS:
        value = rule.get(key)
        if key.startswith("port_range") and value is not None:
            value = int(value)
        elif key == "protocol" and value is not None:
            value = str(value).lower()
        out.append(value if value not in ("", None) else None)
    return tuple(out)


def existing_rules(conn: Any, group_id: str) -> list[Any]:
    return list(conn.network.security_group_rules(security_group_id=group_id))


def sdk_fields(rule: Any) -> dict[str, Any]:
    """An SDK rule's Neutron fields (the SDK names ``ethertype`` ``ether_type``)."""
    return {key: getattr(rule, "ether_type" if key == "ethertype" else key)
            for key in RULE_KEYS}


def port_range(value: Any) -> int | None:
    return None if value is None or value == "" else int(value)


RULE = PropertySchema(MAP, schema={
    "direction": PropertySchema(STRING, "ingress or egress.", default="ingress",
                                allowed_values=("ingress", "egress")),
    "ethertype": PropertySchema(STRING, "IPv4 or IPv6.", default="IPv4",
                                allowed_values=("IPv4", "IPv6")),
    "port_range_min": PropertySchema(INTEGER, "The first port (or the ICMP type).",
                                     min=0, max=65535),
    "port_range_max": PropertySchema(INTEGER, "The last port (or the ICMP code).",
                                     min=0, max=65535),
    "protocol": PropertySchema(STRING, "tcp, udp, icmp... or a number."),
    "remote_mode": PropertySchema(STRING, "Which of the remote properties applies.",
                                  default="remote_ip_prefix",
                                  allowed_values=("remote_ip_prefix", "remote_group_id")),
    "remote_group_id": PropertySchema(STRING, "The remote group (default: this group).",
                                      custom_constraint="neutron.security_group"),
    "remote_ip_prefix": PropertySchema(STRING, "The remote CIDR.",
                                       custom_constraint="net_cidr"),
})


class SecurityGroup(OpenStackResource):
    noun = "security group"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::SecurityGroup",
        description="A Neutron security group and its rules.",
        properties={
            "name": PropertySchema(STRING, "The group's name (not 'default').",
                                   update_allowed=True),
            "description": PropertySchema(STRING, "What the group is for.",
                                          update_allowed=True),
            "rules": PropertySchema(LIST, "The group's rules.", default=[],
                                    update_allowed=True, item=RULE),
        },
        attributes=frozenset({"rules", "show"}),
    )

    def _wanted(self, conn: Any, group_id: str, rules: list[Mapping[str, Any]],
                strict: bool = True) -> list[dict[str, Any]]:
        """The rules the group has with these template rules, in Neutron's fields, without
        duplicates. Not ``strict``: a rule whose remote group is gone is left out."""
        wanted: dict[Rule, dict[str, Any]] = {}
        for given in rules:
            rule: dict[str, Any] = {
                "direction": given.get("direction") or "ingress",
                "ethertype": given.get("ethertype") or "IPv4",
                "protocol": given.get("protocol") or None,
                "port_range_min": port_range(given.get("port_range_min")),
                "port_range_max": port_range(given.get("port_range_max")),
                "remote_ip_prefix": None, "remote_group_id": None}
            if given.get("remote_mode") == "remote_group_id":
                ref = given.get("remote_group_id")
                try:
                    rule["remote_group_id"] = group_id if not ref or ref == group_id else \
                        resolve(conn.network.find_security_group, "security group", ref)
                except ResourceFailure:
                    if strict:
                        raise
                    continue
            else:
                rule["remote_ip_prefix"] = given.get("remote_ip_prefix") or None
            wanted.setdefault(rule_key(rule), rule)
        if not any(r["direction"] == "egress" for r in wanted.values()):
            for rule in DEFAULT_EGRESS:
                wanted.setdefault(rule_key(rule), dict(rule))
        return list(wanted.values())

    def _match_rules(self, ctx: PluginContext, conn: Any, group_id: str,
                     old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """Delete the group's rules that ``old`` gave and ``new`` does not, then make the
        missing ones of ``new``. Rules neither gave are left: those of
        ``OS::Neutron::SecurityGroupRule`` resources on the group, and any added by hand."""
        wanted = self._wanted(conn, group_id, list(new.get("rules") or []))
        keys = {rule_key(r) for r in wanted}
        before = {rule_key(r) for r in self._wanted(conn, group_id,
                                                    list(old.get("rules") or []), False)}
        have = existing_rules(conn, group_id)
        for rule in have:
            found = rule_key(sdk_fields(rule))
            if found in before and found not in keys:
                ctx.check_lease()
                conn.network.delete_security_group_rule(rule, ignore_missing=True)
        present = {rule_key(sdk_fields(r)) for r in have}
        for rule in wanted:
            if rule_key(rule) in present:
                continue
            ctx.check_lease()
            body = {k: v for k, v in rule.items() if v is not None}
            try:
                conn.network.create_security_group_rule(security_group_id=group_id, **body)
            except sdk_exceptions.ConflictException as exc:
                if neutron_type(exc) != "SecurityGroupRuleExists":
                    raise  # made by a step racing this one: what is wanted is there

    @staticmethod
    def _check_name(props: Mapping[str, Any]) -> None:
        if props.get("name") == "default":
            raise ResourceFailure('Security groups cannot be assigned the name "default".')

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        return tagged(conn.network.security_groups, owner_tag(ctx))

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        self._check_name(props)
        body = {k: props[k] for k in ("name", "description") if props.get(k) is not None}
        body.setdefault("name", physical_name(ctx))  # Heat's name when the template gives none
        return conn.network.create_security_group(**body, tags=with_tags(ctx, {}))

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.network.get_security_group(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.network.delete_security_group(physical_id, ignore_missing=False)

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        self._check_name(new)
        body = {k: new.get(k) or "" for k in ("name", "description")
                if old.get(k) != new.get(k)}
        if "name" in body and new.get("name") is None:
            body["name"] = physical_name(ctx)
        if body:
            conn.network.update_security_group(physical_id, **body)
        if old.get("rules") != new.get("rules"):
            self._match_rules(ctx, conn, physical_id, old, new)
        return self.fetch(conn, physical_id)

    def actual(self, obj: Any) -> dict[str, Any]:
        return {"name": obj.name, "description": obj.description}

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"rules": list(obj.security_group_rules or []),
                "show": obj.to_dict(computed=False)}

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        with translated(f"creating security group {ctx.resource_name}"):
            group = self.find(conn, ctx, props)
            if group is None:
                ctx.check_lease()
                group = self.make(conn, ctx, props)
            # A new group has Neutron's default rules: what an empty template gives.
            self._match_rules(ctx, conn, str(group.id), {}, props)
            group = self.fetch(conn, str(group.id))
        return self.progress(conn, group, props, CREATE)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        if action != CREATE:
            return super().poll(ctx, action, physical_id, props, state)
        # A create interrupted between the group and its rules: the rules are matched again.
        return self.create(ctx, props)


class SecurityGroupRule(OpenStackResource):
    noun = "security group rule"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::SecurityGroupRule",
        description="A rule added to a Neutron security group.",
        properties={
            "security_group": PropertySchema(STRING, "The group (name or id).", required=True,
                                             custom_constraint="neutron.security_group"),
            "description": PropertySchema(STRING, "What the rule is for."),
            "direction": PropertySchema(STRING, "ingress or egress.", default="ingress",
                                        allowed_values=("ingress", "egress")),
            "ethertype": PropertySchema(STRING, "IPv4 or IPv6.", default="IPv4",
                                        allowed_values=("IPv4", "IPv6")),
            "port_range_min": PropertySchema(INTEGER, "The first port (or the ICMP type).",
                                             min=0, max=65535),
            "port_range_max": PropertySchema(INTEGER, "The last port (or the ICMP code).",
                                             min=0, max=65535),
            "protocol": PropertySchema(STRING, "The protocol: a name or a number (0-255).",
                                       default="tcp", allowed_values=PROTOCOLS),
            "remote_group": PropertySchema(STRING, "The remote group (name or id).",
                                           custom_constraint="neutron.security_group"),
            "remote_ip_prefix": PropertySchema(STRING, "The remote CIDR.",
                                               custom_constraint="net_cidr"),
        },
        attributes=frozenset({"show"}),
    )

    def _rule(self, conn: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        """The rule in Neutron's fields, references resolved (``security_group_id`` too)."""
        if props.get("remote_group") and props.get("remote_ip_prefix"):
            raise ResourceFailure("give 'remote_group' or 'remote_ip_prefix', not both")
        low, high = port_range(props.get("port_range_min")), \
            port_range(props.get("port_range_max"))
        if low is not None and high is not None and high < low and \
                props.get("protocol") not in ("icmp", "icmpv6", "ipv6-icmp"):
            raise ResourceFailure("The minimum port number must be less than or equal to "
                                  "the maximum port number.")
        rule: dict[str, Any] = {
            "security_group_id": resolve(conn.network.find_security_group, "security group",
                                         props["security_group"]),
            "direction": props.get("direction") or "ingress",
            "ethertype": props.get("ethertype") or "IPv4",
            "protocol": props.get("protocol") or None,
            "port_range_min": low, "port_range_max": high,
            "remote_ip_prefix": props.get("remote_ip_prefix") or None,
            "remote_group_id": None}
        if props.get("remote_group"):
            rule["remote_group_id"] = resolve(conn.network.find_security_group,
                                              "security group", props["remote_group"])
        return rule

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        rule = self._rule(conn, props)
        key = rule_key(rule)
        return next((r for r in existing_rules(conn, rule["security_group_id"])
                     if rule_key(sdk_fields(r)) == key), None)

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        body = {k: v for k, v in self._rule(conn, props).items() if v is not None}
        if props.get("description"):
            body["description"] = props["description"]
        return conn.network.create_security_group_rule(**body)

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.network.get_security_group_rule(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.network.delete_security_group_rule(physical_id, ignore_missing=False)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        try:
            return super().delete(ctx, physical_id, props)
        except ResourceFailure:
            if physical_id is None:
                return Progress.finished(None)  # its group is gone, and the rule with it
            raise
