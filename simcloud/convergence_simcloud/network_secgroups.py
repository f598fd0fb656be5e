"""Neutron's security groups and security group rules in the simulated cloud.

Callers: ``convergence_simcloud.network`` includes :data:`router` under ``/network/v2.0``;
``convergence_simcloud.network_ports`` calls :func:`default_group` to put a new port in its
project's ``default`` group. Every project gets a ``default`` group the first time it lists or
creates groups or ports, with Neutron's rules: egress to anywhere over IPv4 and IPv6, and
ingress from members of the group itself. A new group gets the two egress rules (and the tags
it is created with). A rule's protocol must be one Neutron knows (else 400
``SecurityGroupRuleInvalidProtocol``). Deleting a group that a port uses answers 409
``SecurityGroupInUse``; a duplicate rule 409 ``SecurityGroupRuleExists``; deleting a project's
``default`` group 409.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of
from convergence_simcloud.network_common import (
    bad_request,
    body_of,
    delete_faulted,
    get_owned,
    get_visible,
    list_kind,
    neutron_error,
    new_record,
    not_found,
    project_of,
    touch,
    updated,
)
from convergence_simcloud.network_quotas import check_quota
from convergence_simcloud.state import Record, SimCloud, new_id

router = APIRouter()
RULE_KEYS = ("direction", "ethertype", "protocol", "port_range_min", "port_range_max",
             "remote_ip_prefix", "remote_group_id")
PROTOCOLS = ("ah", "dccp", "egp", "esp", "gre", "hopopt", "icmp", "igmp", "ip", "ipip",
             "ipv6-encap", "ipv6-frag", "ipv6-icmp", "icmpv6", "ipv6-nonxt", "ipv6-opts",
             "ipv6-route", "ospf", "pgm", "rsvp", "sctp", "tcp", "udp", "udplite", "vrrp")


def group_not_found(group_id: str) -> CloudError:
    return not_found("SecurityGroupNotFound", "Security group", group_id)


def rule_not_found(rule_id: str) -> CloudError:
    return not_found("SecurityGroupRuleNotFound", "Security group rule", rule_id)


def _check_protocol(protocol: Any) -> None:
    """400 ``SecurityGroupRuleInvalidProtocol`` unless Neutron knows the protocol (a name, or
    a number from 0 to 255)."""
    if protocol is None or str(protocol).lower() in PROTOCOLS:
        return
    if str(protocol).isdigit() and 0 <= int(str(protocol)) <= 255:
        return
    raise neutron_error(400, "SecurityGroupRuleInvalidProtocol",
                        f"Security group rule protocol {protocol} not supported. Only "
                        f"protocol values {[None, *PROTOCOLS]} and integer representations "
                        "[0 to 255] are supported.")


def make_rule(cloud: SimCloud, group: Record, body: dict[str, Any]) -> Record:
    direction = body.get("direction")
    ethertype = body.get("ethertype", "IPv4")
    if direction not in ("ingress", "egress"):
        raise bad_request(f"Invalid input for direction: {direction!r} is not in "
                          "['ingress', 'egress'].")
    if ethertype not in ("IPv4", "IPv6"):
        raise bad_request(f"Invalid input for ethertype: {ethertype!r}.")
    low, high = body.get("port_range_min"), body.get("port_range_max")
    if low is not None and high is not None and int(low) > int(high):
        raise bad_request("For TCP/UDP protocols, port_range_min must be <= port_range_max.")
    if body.get("remote_ip_prefix") and body.get("remote_group_id"):
        raise bad_request("Only remote_ip_prefix or remote_group_id may be provided.")
    _check_protocol(body.get("protocol"))
    fields = {"direction": direction, "ethertype": ethertype,
              "protocol": body.get("protocol"),
              "port_range_min": None if low is None else int(low),
              "port_range_max": None if high is None else int(high),
              "remote_ip_prefix": body.get("remote_ip_prefix"),
              "remote_group_id": body.get("remote_group_id")}
    for rule in cloud.kind("security_group_rule").values():
        if rule["security_group_id"] == group["id"] and \
                all(rule[k] == fields[k] for k in RULE_KEYS):
            raise neutron_error(409, "SecurityGroupRuleExists",
                                f"Security group rule already exists. Rule id is "
                                f"{rule['id']}.")
    rule = new_record(cloud, group["project_id"], id=new_id(),
                      security_group_id=group["id"], remote_address_group_id=None,
                      normalized_cidr=fields["remote_ip_prefix"], **fields)
    rule["description"] = body.get("description") or ""
    cloud.kind("security_group_rule")[rule["id"]] = rule
    return rule


def make_group(cloud: SimCloud, project_id: str, name: str, description: str = "",
               default: bool = False) -> Record:
    group = new_record(cloud, project_id, id=new_id(), name=name, stateful=True,
                       shared=False)
    group["description"] = description
    group["tags"] = []
    cloud.kind("security_group")[group["id"]] = group
    for ethertype in ("IPv4", "IPv6"):
        make_rule(cloud, group, {"direction": "egress", "ethertype": ethertype})
        if default:
            make_rule(cloud, group, {"direction": "ingress", "ethertype": ethertype,
                                     "remote_group_id": group["id"]})
    return group


def default_group(cloud: SimCloud, project_id: str) -> Record:
    """The project's ``default`` group, created on first use. Call under the lock."""
    for group in cloud.kind("security_group").values():
        if group["project_id"] == project_id and group["name"] == "default":
            return group
    return make_group(cloud, project_id, "default", "Default security group", default=True)


def show_rule(rule: Record) -> Record:
    return {**rule, "tenant_id": rule["project_id"]}


def show_group(cloud: SimCloud, group: Record) -> Record:
    rules = [show_rule(r) for r in cloud.kind("security_group_rule").values()
             if r["security_group_id"] == group["id"]]
    return {**group, "tenant_id": group["project_id"], "security_group_rules": rules}


def _ensure_default(cloud: SimCloud, who: Caller) -> None:
    if who.project_id:
        default_group(cloud, who.project_id)


@router.get("/security-groups")
def list_groups(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _ensure_default(cloud, who)
        return list_kind(cloud, request, who, "security_group",
                         lambda g: show_group(cloud, g))


@router.post("/security-groups", status_code=201)
async def create_group(request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "security_group")
    cloud = cloud_of(request)
    with cloud.locked():
        project_id = project_of(who, body)
        default_group(cloud, project_id)
        name = str(body.get("name") or "")
        if name == "default":
            raise neutron_error(409, "SecurityGroupDefaultAlreadyExists",
                                "Default security group already exists.")
        check_quota(cloud, "security_group", project_id, body)
        group = make_group(cloud, project_id, name, str(body.get("description") or ""))
        group["tags"] = list(body.get("tags") or [])
        shown = show_group(cloud, group)
    cloud.changed()
    return {"security_group": shown}


@router.get("/security-groups/{group_id}")
def show_group_route(group_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        group = get_visible(cloud, who, "security_group", group_id, group_not_found(group_id))
        return {"security_group": show_group(cloud, group)}


@router.put("/security-groups/{group_id}")
async def update_group(group_id: str, request: Request, who: Authenticated,
                       ) -> dict[str, Any]:
    body = await body_of(request, "security_group")
    cloud = cloud_of(request)
    with cloud.locked():
        group = get_owned(cloud, who, "security_group", group_id, group_not_found(group_id))
        updated(group, body, ("name", "description", "tags"))
        touch(cloud, group)
        shown = show_group(cloud, group)
    cloud.changed()
    return {"security_group": shown}


@router.delete("/security-groups/{group_id}", status_code=204)
def delete_group(group_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        group = get_owned(cloud, who, "security_group", group_id, group_not_found(group_id))
        if group["name"] == "default" and not who.is_admin:
            raise neutron_error(409, "SecurityGroupCannotRemoveDefault",
                                "Insufficient rights for removing default security group.")
        if any(group_id in p["security_groups"] for p in cloud.kind("port").values()):
            raise neutron_error(409, "SecurityGroupInUse",
                                f"Security Group {group_id} in use.")
        if delete_faulted(cloud, "security_group", group):
            return Response(status_code=204)
        rules = cloud.kind("security_group_rule")
        for rule_id in [r["id"] for r in rules.values() if r["security_group_id"] == group_id]:
            del rules[rule_id]
        del cloud.kind("security_group")[group_id]
    cloud.changed()
    return Response(status_code=204)


@router.get("/security-group-rules")
def list_rules(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _ensure_default(cloud, who)
        return list_kind(cloud, request, who, "security_group_rule", show_rule)


@router.post("/security-group-rules", status_code=201)
async def create_rule(request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "security_group_rule")
    cloud = cloud_of(request)
    with cloud.locked():
        group_id = str(body.get("security_group_id") or "")
        group = get_owned(cloud, who, "security_group", group_id, group_not_found(group_id))
        check_quota(cloud, "security_group_rule", group["project_id"], body)
        rule = make_rule(cloud, group, body)
    cloud.changed()
    return {"security_group_rule": show_rule(rule)}


@router.get("/security-group-rules/{rule_id}")
def show_rule_route(rule_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"security_group_rule": show_rule(get_visible(
            cloud, who, "security_group_rule", rule_id, rule_not_found(rule_id)))}


@router.delete("/security-group-rules/{rule_id}", status_code=204)
def delete_rule(rule_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        rule = get_owned(cloud, who, "security_group_rule", rule_id, rule_not_found(rule_id))
        if not delete_faulted(cloud, "security_group_rule", rule):
            del cloud.kind("security_group_rule")[rule_id]
    cloud.changed()
    return Response(status_code=204)
