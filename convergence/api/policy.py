"""What a caller may do: the API's policy, enforced with oslo.policy on Heat's rules.

Callers: ``convergence.api.app.create_app`` builds a :class:`Policy` from the settings
(:func:`build_policy`, which reads ``CONVERGENCE_POLICY_FILE`` at start) and keeps it on
``app.state.policy``; every route under ``/v1/{tenant_id}`` names its rule in its decorator
(``dependencies=[rule("stacks:delete")]``), checked after ``convergence.api.auth.require_auth``
has authenticated the caller and before anything is looked up or changed. The actions route
checks the rule of the action its body names (:func:`enforce`); the routes that take a
template check the ``resource_types:<type>`` rules of the types it uses (:func:`check_types`),
and the resource type list shows only the types the caller may use (:func:`type_allowed`).
The signed-URL routes (``/v1/signed/...``) are authenticated by their signature and checked by
no rule.

The rules and their defaults (Heat's) are in ``convergence.api.policies``. The caller's
credentials are its project and roles, the roles completed as Keystone's default implied roles
complete them (:func:`effective_roles`: admin implies member, member implies reader), in every
authentication mode. The target is the URL's tenant, or the admin's own project for an admin
acting in another tenant (as Heat does). A refusal is a 403 in Heat's error shape, naming the
rule: ``You are not authorized to use stacks:delete.``

A policy file (YAML or JSON, Heat's format) overrides rules one by one and is read again when
it changes on disk, as oslo.policy does for Heat.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from fastapi import Depends, Request, params
from oslo_config import cfg
from oslo_policy import policy as oslo

from convergence.api.auth import Identity, require_auth
from convergence.api.errors import ApiError
from convergence.api.policies import RESOURCE_TYPE_PREFIX, list_rules
from convergence.settings import Settings
from convergence.template import TemplateError, load_document

log = logging.getLogger(__name__)

# Keystone's default implied roles: a role stands for the roles it implies, transitively.
IMPLIED_ROLES: Mapping[str, tuple[str, ...]] = {"admin": ("member",), "member": ("reader",)}


def effective_roles(roles: Iterable[str]) -> frozenset[str]:
    """``roles`` with every role they imply (``{"admin"}`` -> admin, member, reader)."""
    found = {r.lower() for r in roles}
    pending = list(found)
    while pending:
        for implied in IMPLIED_ROLES.get(pending.pop(), ()):
            if implied not in found:
                found.add(implied)
                pending.append(implied)
    return frozenset(found)


def forbidden(action: str) -> ApiError:
    """Heat's refusal (``heat.common.exception.Forbidden``), naming what was refused."""
    return ApiError(403, "Forbidden", f"You are not authorized to use {action}.")


class Policy:
    """Heat's rules with their defaults, overridden by a policy file when one is given."""

    def __init__(self, policy_file: str | None = None) -> None:
        # This enforcer's own configuration: no command line, no configuration file read.
        conf = cfg.ConfigOpts()
        conf(args=[], project="convergence", default_config_files=[], default_config_dirs=[])
        self._enforcer = oslo.Enforcer(conf, policy_file=policy_file,
                                       use_conf=policy_file is not None)
        # No policy.d directories: the file named is the only one read.
        conf.set_override("policy_dirs", [], group="oslo_policy")
        self._enforcer.register_defaults(list_rules())
        if policy_file is None:
            self._enforcer.set_rules({d.name: d.check
                                      for d in self._enforcer.registered_rules.values()})
        self._lock = threading.Lock()
        self.policy_file = policy_file
        with self._lock:
            self._enforcer.load_rules()

    @staticmethod
    def credentials(identity: Identity) -> dict[str, Any]:
        return {"user_id": identity.user, "project_id": identity.project,
                "roles": sorted(effective_roles(identity.roles)), "is_admin_project": True}

    @staticmethod
    def target(identity: Identity, tenant: str) -> dict[str, str]:
        project = identity.project if identity.is_admin else tenant
        return {"project_id": project, "tenant_id": project}

    def allowed(self, name: str, identity: Identity, tenant: str) -> bool:
        """Whether the rule ``name`` (a registered one) lets ``identity`` act in ``tenant``."""
        with self._lock:
            return bool(self._enforcer.authorize(name, self.target(identity, tenant),
                                                 self.credentials(identity)))

    def enforce(self, name: str, identity: Identity, tenant: str) -> None:
        """Raise Heat's 403 unless the rule ``name`` allows it."""
        if not self.allowed(name, identity, tenant):
            log.info("policy refused %s to user %s of project %s in %s", name,
                     identity.user, identity.project, tenant)
            raise forbidden(name)

    def type_rules(self) -> frozenset[str]:
        """The resource types (or ``Prefix::*`` patterns) some rule is about."""
        with self._lock:
            self._enforcer.load_rules()  # the policy file may have changed
            return frozenset(name[len(RESOURCE_TYPE_PREFIX):] for name in self._enforcer.rules
                             if name.startswith(RESOURCE_TYPE_PREFIX))

    def type_allowed(self, type_name: str, identity: Identity, tenant: str) -> bool:
        """Whether ``identity`` may use ``type_name``: its ``resource_types:`` rule and its
        family's (``OS::Keystone::*``) allow it, or no rule names it (Heat's order)."""
        ruled = self.type_rules()
        family = "::".join([*type_name.split("::")[:-1], "*"])
        for name in (type_name, family):
            if name not in ruled:
                continue
            with self._lock:
                if not self._enforcer.enforce(RESOURCE_TYPE_PREFIX + name,
                                              self.target(identity, tenant),
                                              self.credentials(identity)):
                    return False
        return True


def build_policy(settings: Settings) -> Policy:
    """The policy of ``settings.policy_file`` (None: Heat's defaults); a file that cannot be
    read raises ValueError, so that the API does not start on a policy it cannot know."""
    path = settings.policy_file
    if path is None:
        return Policy()
    file = Path(path).expanduser().absolute()
    if not file.is_file():
        raise ValueError(f"cannot read the policy file {file} (CONVERGENCE_POLICY_FILE)")
    try:
        return Policy(str(file))
    except ValueError as exc:
        raise ValueError(f"the policy file {file} is not valid YAML/JSON: {exc}") from None


def policy_of(request: Request) -> Policy:
    found: Policy | None = getattr(request.app.state, "policy", None)
    if found is None:  # an app built without one: the defaults
        found = request.app.state.policy = Policy()
    return found


def _caller(request: Request) -> tuple[Identity, str]:
    identity: Identity = request.state.identity  # set by require_auth
    return identity, str(request.path_params["tenant_id"])


def enforce(request: Request, name: str) -> None:
    """Check the rule ``name`` for the request's (authenticated) caller: Heat's 403 if not."""
    identity, tenant = _caller(request)
    policy_of(request).enforce(name, identity, tenant)


# The rule each route's dependency checks, for the tests that walk the routes.
RULE_OF: dict[Callable[..., None], str] = {}


@functools.cache
def _check(name: str) -> Callable[..., None]:
    def check(request: Request, identity: Identity = Depends(require_auth)  # noqa: B008
              ) -> None:
        enforce(request, name)

    RULE_OF[check] = name
    return check


def rule(name: str) -> params.Depends:
    """The dependency a route declares to be guarded by the rule ``name``."""
    return params.Depends(_check(name))


# Resource types -----------------------------------------------------------------------------

def _types_in(document: Any) -> set[str]:
    """The types a template's resources name, and those an environment maps types to."""
    found: set[str] = set()
    if not isinstance(document, Mapping):
        return found
    resources = document.get("resources")
    if isinstance(resources, Mapping):
        found.update(d["type"] for d in resources.values()
                     if isinstance(d, Mapping) and isinstance(d.get("type"), str))
    registry = document.get("resource_registry")
    if isinstance(registry, Mapping):
        found.update(v for v in registry.values() if isinstance(v, str) and "::" in v)
    return found


def template_types(texts: Iterable[str], ruled: frozenset[str]) -> set[str]:
    """The resource types the texts (a template, its files, its environments) use that a
    rule is about. A text that names none of them is not parsed; one that cannot be parsed is
    left to the use case, which says what is wrong with it."""
    needles = [r[:-1] if r.endswith("::*") else r for r in ruled]
    found: set[str] = set()
    for text in texts:
        if not any(n in text for n in needles):
            continue
        try:
            document = load_document(text, "template")
        except (TemplateError, ValueError):
            continue
        found.update(t for t in _types_in(document)
                     if t in ruled or "::".join([*t.split("::")[:-1], "*"]) in ruled)
    return found


def check_types(request: Request, body: Mapping[str, Any]) -> None:
    """Heat's ``resource_types:<type>`` rules over the template a request body carries: 403
    for the first type the caller may not use (by default: a flavor, a quota, a volume type,
    Keystone's types... for anyone but an admin)."""
    identity, tenant = _caller(request)
    found = policy_of(request)
    ruled = found.type_rules()
    if not ruled:
        return
    texts = [v for v in (body.get("template"), body.get("environment")) if v is not None]
    files = body.get("files")
    if isinstance(files, Mapping):
        texts += list(files.values())
    strings = [t if isinstance(t, str) else _dumps(t) for t in texts]
    for type_name in sorted(template_types(strings, ruled)):
        if not found.type_allowed(type_name, identity, tenant):
            raise forbidden(RESOURCE_TYPE_PREFIX + type_name)


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return ""


def type_allowed(request: Request, type_name: str) -> bool:
    """Whether the request's caller may use ``type_name`` (the resource type list)."""
    identity, tenant = _caller(request)
    return policy_of(request).type_allowed(type_name, identity, tenant)
