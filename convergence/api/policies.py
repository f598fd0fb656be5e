"""The API's policy rules and their defaults: Heat's rule names and Heat's current defaults.

Callers: ``convergence.api.policy`` registers :func:`list_rules` with its oslo.policy enforcer;
the routes name their rule (``convergence.api.policy.rule``); the policy tests walk
:data:`OPERATIONS` to check that every route under ``/v1/{tenant_id}`` has one.

The defaults are Heat's secure RBAC defaults (``heat/policies/*.py``): project-scoped,
``reader`` reads, ``member`` writes, ``admin`` administers; an operator's Heat ``policy.yaml``
overrides them rule by rule (``CONVERGENCE_POLICY_FILE``). Roles imply one another as
Keystone's default implied roles do (admin → member → reader), whatever the authentication
mode (``convergence.api.policy.effective_roles``).

Where this engine's default is stricter than Heat's, it says so in the rule's description:
``resource:signal`` and ``actions:check`` change the stack (a signal scales a group or
completes a wait condition; a check takes the stack's in-progress slot and sets its status),
so they are the member's here, the reader's in Heat. Servers signal through signed URLs
(``/v1/signed/...``), which are authenticated by their signature and checked by no rule.

The rules of this engine's own routes (a stack's progress, the project's event stream, the
webhook subscriptions) are named in the same style, with the same kind of defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from oslo_policy import policy

# Check strings that embody the personas (Heat's heat/policies/base.py).
PROJECT_READER = "role:reader and project_id:%(project_id)s"
PROJECT_MEMBER = "role:member and project_id:%(project_id)s"
PROJECT_ADMIN = "role:admin and project_id:%(project_id)s"
PROJECT_STACK_USER = "role:heat_stack_user and project_id:%(project_id)s"
PROJECT_READER_OR_STACK_USER = f"({PROJECT_READER}) or ({PROJECT_STACK_USER})"
PROJECT_MEMBER_OR_STACK_USER = f"({PROJECT_MEMBER}) or ({PROJECT_STACK_USER})"

STACK = "/stacks/{stack_name}/{stack_id}"
RESOURCE = STACK + "/resources/{resource_name}"
ANY_METHOD = "*"  # the lookups answer every method with a redirect

# The rules the defaults above refer to, and that operators' Heat policy files name.
BASE_RULES = (
    policy.RuleDefault("context_is_admin", "(role:admin and is_admin_project:True)",
                       "Decides what is required for the 'is_admin:True' check to succeed."),
    policy.RuleDefault("project_admin", "role:admin", "Default rule for project admin."),
    policy.RuleDefault("deny_stack_user", "not role:heat_stack_user",
                       "Default rule for deny stack user."),
    policy.RuleDefault("deny_everybody", "!", "Default rule for deny everybody."),
    policy.RuleDefault("allow_everybody", "", "Default rule for allow everybody."),
)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: its name, default check string, description and the routes it guards
    (method, path under ``/v1/{tenant_id}``)."""

    name: str
    check: str
    description: str
    operations: tuple[tuple[str, str], ...]


def _r(name: str, check: str, description: str, *operations: tuple[str, str]) -> Rule:
    return Rule(name, check, description, operations)


RULES: tuple[Rule, ...] = (
    # stacks (heat/policies/stacks.py)
    _r("stacks:index", PROJECT_READER, "List stacks.", ("GET", "/stacks")),
    _r("stacks:create", PROJECT_MEMBER, "Create stack.", ("POST", "/stacks")),
    _r("stacks:lookup", PROJECT_READER_OR_STACK_USER,
       "Find a stack by name or id: a redirect to its canonical path.",
       (ANY_METHOD, "/stacks/{name_or_id}"), (ANY_METHOD, "/stacks/{name_or_id}/{rest:path}")),
    _r("stacks:show", PROJECT_READER, "Show stack.", ("GET", STACK)),
    _r("stacks:update", PROJECT_MEMBER, "Update stack.", ("PUT", STACK)),
    _r("stacks:update_patch", PROJECT_MEMBER, "Update stack (PATCH).", ("PATCH", STACK)),
    _r("stacks:delete", PROJECT_MEMBER, "Delete stack.", ("DELETE", STACK)),
    _r("stacks:abandon", PROJECT_MEMBER, "Abandon stack.", ("DELETE", STACK + "/abandon")),
    _r("stacks:export", PROJECT_MEMBER, "Export stack.", ("GET", STACK + "/export")),
    _r("stacks:template", PROJECT_READER, "Get stack template.", ("GET", STACK + "/template")),
    _r("stacks:environment", PROJECT_READER, "Get stack environment.",
       ("GET", STACK + "/environment")),
    _r("stacks:files", PROJECT_READER, "Get stack files.", ("GET", STACK + "/files")),
    _r("stacks:list_outputs", PROJECT_READER, "List outputs.", ("GET", STACK + "/outputs")),
    _r("stacks:show_output", PROJECT_READER, "Show outputs.",
       ("GET", STACK + "/outputs/{output_key}")),
    _r("stacks:preview", PROJECT_READER, "Preview stack.", ("POST", "/stacks/preview")),
    _r("stacks:preview_update", PROJECT_MEMBER, "Preview update stack.",
       ("PUT", STACK + "/preview")),
    _r("stacks:preview_update_patch", PROJECT_MEMBER, "Preview update stack (PATCH).",
       ("PATCH", STACK + "/preview")),
    _r("stacks:validate_template", PROJECT_MEMBER, "Validate template.", ("POST", "/validate")),
    _r("stacks:list_resource_types", PROJECT_READER, "List resource types.",
       ("GET", "/resource_types")),
    _r("stacks:resource_schema", PROJECT_READER, "Show resource type schema.",
       ("GET", "/resource_types/{type_name}")),
    _r("stacks:generate_template", PROJECT_MEMBER, "Generate a template of a resource type.",
       ("GET", "/resource_types/{type_name}/template")),
    _r("stacks:list_template_versions", PROJECT_READER, "List template versions.",
       ("GET", "/template_versions")),
    _r("stacks:list_template_functions", PROJECT_READER, "List template functions.",
       ("GET", "/template_versions/{template_version}/functions")),
    # This engine's: how far the stack's latest request has got (and its stream).
    _r("stacks:progress", PROJECT_READER, "Show (or watch) the progress of the stack's "
       "latest request (an extension).", ("GET", STACK + "/progress")),
    # resources (heat/policies/resource.py)
    _r("resource:index", PROJECT_READER, "List resources.", ("GET", STACK + "/resources")),
    _r("resource:show", PROJECT_READER, "Show resource.", ("GET", RESOURCE)),
    _r("resource:metadata", PROJECT_READER_OR_STACK_USER, "Show resource metadata.",
       ("GET", RESOURCE + "/metadata")),
    _r("resource:signal", PROJECT_MEMBER_OR_STACK_USER,
       "Signal resource. (Heat's default lets a reader signal; a signal changes the stack.)",
       ("POST", RESOURCE + "/signal")),
    _r("resource:mark_unhealthy", PROJECT_MEMBER, "Mark resource as unhealthy.",
       ("PATCH", RESOURCE)),
    # events (heat/policies/events.py)
    _r("events:index", PROJECT_READER, "List events (or watch them).",
       ("GET", STACK + "/events"), ("GET", RESOURCE + "/events")),
    _r("events:show", PROJECT_READER, "Show event.", ("GET", STACK + "/events/{event_id}"),
       ("GET", RESOURCE + "/events/{event_id}")),
    _r("events:project_index", PROJECT_READER, "List (or watch) the events of every stack "
       "of the project (an extension).", ("GET", "/events")),
    # actions (heat/policies/actions.py): POST .../actions checks the rule of its action.
    _r("actions:suspend", PROJECT_MEMBER, "Suspend a stack.", ("POST", STACK + "/actions")),
    _r("actions:resume", PROJECT_MEMBER, "Resume a suspended stack.",
       ("POST", STACK + "/actions")),
    _r("actions:check", PROJECT_MEMBER, "Check stack resources. (Heat's default lets a reader "
       "check; a check changes the stack's status.)", ("POST", STACK + "/actions")),
    _r("actions:cancel_update", PROJECT_MEMBER, "Cancel stack operation and roll back.",
       ("POST", STACK + "/actions")),
    _r("actions:cancel_without_rollback", PROJECT_MEMBER,
       "Cancel stack operation without rolling back.", ("POST", STACK + "/actions")),
    # software configuration (heat/policies/software_configs.py, software_deployments.py)
    _r("software_configs:index", PROJECT_READER, "List configs.", ("GET", "/software_configs")),
    _r("software_configs:create", PROJECT_MEMBER, "Create config.",
       ("POST", "/software_configs")),
    _r("software_configs:show", PROJECT_READER, "Show config details.",
       ("GET", "/software_configs/{config_id}")),
    _r("software_configs:delete", PROJECT_MEMBER, "Delete config.",
       ("DELETE", "/software_configs/{config_id}")),
    _r("software_deployments:index", PROJECT_READER, "List deployments.",
       ("GET", "/software_deployments")),
    _r("software_deployments:create", PROJECT_MEMBER, "Create deployment.",
       ("POST", "/software_deployments")),
    _r("software_deployments:show", PROJECT_READER, "Show deployment details.",
       ("GET", "/software_deployments/{deployment_id}")),
    _r("software_deployments:update", PROJECT_MEMBER, "Update deployment.",
       ("PUT", "/software_deployments/{deployment_id}")),
    _r("software_deployments:delete", PROJECT_MEMBER, "Delete deployment.",
       ("DELETE", "/software_deployments/{deployment_id}")),
    _r("software_deployments:metadata", PROJECT_READER_OR_STACK_USER,
       "Show server configuration metadata.",
       ("GET", "/software_deployments/metadata/{server_id}")),
    # the service list and build information (heat/policies/service.py, build_info.py)
    _r("service:index", PROJECT_ADMIN, "List the engine's processes (workers, APIs stepping "
       "in-process): hosts, pids, heartbeats.", ("GET", "/services")),
    _r("build_info:build_info", PROJECT_READER, "Show build information.",
       ("GET", "/build_info")),
    # This engine's webhook subscriptions.
    _r("subscriptions:index", PROJECT_READER, "List webhook subscriptions (an extension).",
       ("GET", "/subscriptions")),
    _r("subscriptions:create", PROJECT_MEMBER, "Create a webhook subscription.",
       ("POST", "/subscriptions")),
    _r("subscriptions:show", PROJECT_READER, "Show a webhook subscription.",
       ("GET", "/subscriptions/{sub_id}")),
    _r("subscriptions:list_deliveries", PROJECT_READER,
       "List a webhook subscription's deliveries.", ("GET", "/subscriptions/{sub_id}/deliveries")),
    _r("subscriptions:delete", PROJECT_MEMBER, "Delete a webhook subscription.",
       ("DELETE", "/subscriptions/{sub_id}")),
)

# Heat's resource_types rules (heat/policies/resource_types.py): who may use a resource type
# in a template, and see it in the type list. A type no rule names is everyone's.
ADMIN_TYPES = (
    "OS::Nova::Flavor", "OS::Cinder::EncryptedVolumeType", "OS::Cinder::VolumeType",
    "OS::Cinder::Quota", "OS::Neutron::Quota", "OS::Nova::Quota", "OS::Octavia::Quota",
    "OS::Manila::ShareType", "OS::Neutron::ProviderNet", "OS::Neutron::QoSPolicy",
    "OS::Neutron::QoSBandwidthLimitRule", "OS::Neutron::QoSDscpMarkingRule",
    "OS::Neutron::QoSMinimumBandwidthRule", "OS::Neutron::QoSMinimumPacketRateRule",
    "OS::Neutron::Segment", "OS::Nova::HostAggregate", "OS::Cinder::QoSSpecs",
    "OS::Cinder::QoSAssociation", "OS::Keystone::*", "OS::Blazar::Host",
    "OS::Octavia::Flavor", "OS::Octavia::FlavorProfile", "OS::Octavia::AvailabilityZone",
    "OS::Octavia::AvailabilityZoneProfile",
)
RESOURCE_TYPE_PREFIX = "resource_types:"

def operations() -> Iterator[tuple[str, str, str]]:
    """``(method, path under /v1/{tenant_id}, rule)`` for every route a rule guards."""
    for rule in RULES:
        for method, path in rule.operations:
            yield method, path, rule.name


def list_rules() -> list[policy.RuleDefault]:
    """Every default, as oslo.policy registers them (and ``oslopolicy`` tools document)."""
    found: list[policy.RuleDefault] = list(BASE_RULES)
    for rule in RULES:
        found.append(policy.DocumentedRuleDefault(
            name=rule.name, check_str=rule.check, description=rule.description,
            operations=[{"method": m, "path": "/v1/{tenant_id}" + p}
                        for m, p in rule.operations],
            scope_types=["project"]))
    found += [policy.RuleDefault(RESOURCE_TYPE_PREFIX + name, "rule:project_admin",
                                 f"Use {name} in a template (and see it listed).",
                                 scope_types=["project"])
              for name in ADMIN_TYPES]
    return found
