"""What a simulated cloud starts with: domains, users, projects, roles, application credentials.

Callers: ``convergence.simcloud.state.SimCloud`` applies a :class:`Seed` when it starts (by
name, so a seed applied over a saved state adds only what is missing);
``convergence.cli.simcloud_cmd`` reads one from ``--seed FILE`` (YAML or JSON, the shape of
:func:`seed_from_mapping`); tests build one directly. The default is Keystone's devstack-like
minimum: user ``admin`` / password ``admin`` with role ``admin`` on project ``admin``, domain
``Default``. Later sessions add the services' seeds (flavors, images, networks) here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_DOMAIN = "Default"
DEFAULT_DOMAIN_ID = "default"


@dataclass(frozen=True)
class SeedUser:
    name: str
    password: str
    # project name -> role names on it; the first project is the user's default.
    projects: dict[str, list[str]] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class SeedAppCredential:
    name: str
    secret: str
    user: str
    project: str
    id: str | None = None
    roles: list[str] | None = None  # None: all the user's roles on the project


@dataclass(frozen=True)
class Seed:
    projects: list[str] = field(default_factory=lambda: ["admin"])
    users: list[SeedUser] = field(default_factory=lambda: [
        SeedUser("admin", "admin", {"admin": ["admin", "member", "reader"]})])
    application_credentials: list[SeedAppCredential] = field(default_factory=list)
    roles: list[str] = field(default_factory=lambda: ["admin", "member", "reader"])


def seed_from_mapping(data: dict[str, Any]) -> Seed:
    """A seed from a parsed file: ``projects: [names]``, ``users: [{name, password, projects:
    {project: [roles]}}]``, ``application_credentials: [{name, secret, user, project, id?,
    roles?}]``, ``roles: [names]``; each key left out keeps the default (the admin user is
    kept unless ``users`` names it differently)."""
    default = Seed()
    users = [SeedUser(name=u["name"], password=u["password"],
                      projects={p: list(r) for p, r in (u.get("projects") or {}).items()},
                      id=u.get("id"))
             for u in data.get("users") or []]
    if users and "admin" not in {u.name for u in users}:
        users = [*default.users, *users]
    creds = [SeedAppCredential(name=c["name"], secret=c["secret"], user=c["user"],
                               project=c["project"], id=c.get("id"), roles=c.get("roles"))
             for c in data.get("application_credentials") or []]
    projects = list(data.get("projects") or [])
    if "admin" not in projects:
        projects.insert(0, "admin")
    for user in users:
        projects += [p for p in user.projects if p not in projects]
    roles = list(data.get("roles") or default.roles)
    for user in users:
        for names in user.projects.values():
            roles += [r for r in names if r not in roles]
    return Seed(projects=projects, users=users or default.users,
                application_credentials=creds, roles=roles)
