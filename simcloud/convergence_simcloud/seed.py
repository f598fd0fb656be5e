"""What a simulated cloud starts with: domains, users, projects, roles, application credentials.

Callers: ``convergence_simcloud.state.SimCloud`` applies a :class:`Seed` when it starts (by
name, so a seed applied over a saved state adds only what is missing);
``convergence.cli.simcloud_cmd`` reads one from ``--seed FILE`` (YAML or JSON, the shape of
:func:`seed_from_mapping`); tests build one directly. The default is Keystone's devstack-like
minimum: user ``admin`` / password ``admin`` with role ``admin`` on project ``admin``, domain
``Default``, and the roles ``member``, ``reader`` and ``service`` (a service user's: it may
validate the tokens of others, as ``admin`` may). The services' seeds are here too: Nova's
flavors (devstack's ``m1.*``), availability zones (``nova``, ``az2``) and default quota,
Glance's images (``cirros``, ``ubuntu``), turned into the services' objects by
:func:`service_objects`.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
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
class SeedNetwork:
    """A network the cloud starts with (Neutron), with one subnet; by default devstack's
    ``public``: external, shared, owned by the admin project, its pool the floating-IP range."""

    name: str = "public"
    cidr: str = "172.24.4.0/24"
    gateway_ip: str | None = "172.24.4.1"
    pool_start: str | None = "172.24.4.10"
    pool_end: str | None = "172.24.4.250"
    external: bool = True
    shared: bool = True
    enable_dhcp: bool = False
    project: str = "admin"
    subnet_name: str | None = None


@dataclass(frozen=True)
class Seed:
    projects: list[str] = field(default_factory=lambda: ["admin"])
    users: list[SeedUser] = field(default_factory=lambda: [
        SeedUser("admin", "admin", {"admin": ["admin", "member", "reader"]})])
    application_credentials: list[SeedAppCredential] = field(default_factory=list)
    # ``service``: what a service's own user (an engine validating its callers' tokens) holds
    roles: list[str] = field(default_factory=lambda: ["admin", "member", "reader", "service"])
    flavors: list[SeedFlavor] = field(default_factory=lambda: default_flavors())
    images: list[SeedImage] = field(default_factory=lambda: default_images())
    availability_zones: list[str] = field(default_factory=lambda: ["nova", "az2"])
    compute_quota: dict[str, int] = field(default_factory=lambda: default_quota())
    networks: list[SeedNetwork] = field(default_factory=lambda: [SeedNetwork()])
    # Neutron's default limits over its own (``port``, ``network``...); {}: Neutron's own.
    network_quota: dict[str, int] = field(default_factory=dict)
    # Cinder's default limits over its own (``volumes``, ``gigabytes``...); {}: Cinder's own.
    volume_quota: dict[str, int] = field(default_factory=dict)


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
                application_credentials=creds, roles=roles, **services_from_mapping(data))


# -- the services' seeds (Nova's flavors, zones and quota; Glance's images) ------------------

@dataclass(frozen=True)
class SeedFlavor:
    name: str
    ram: int  # MiB
    vcpus: int
    disk: int  # GiB
    id: str
    ephemeral: int = 0
    swap: int = 0  # MiB
    rxtx_factor: float = 1.0
    is_public: bool = True
    description: str | None = None
    extra_specs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SeedImage:
    name: str
    size: int  # bytes
    created_at: str
    disk_format: str = "qcow2"
    container_format: str = "bare"
    min_disk: int = 0
    min_ram: int = 0
    visibility: str = "public"
    owner: str = "admin"  # a project name
    id: str | None = None  # None: a stable uuid from the name
    properties: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)


def default_flavors() -> list[SeedFlavor]:
    """devstack's m1 flavors, with their ids and sizes."""
    return [SeedFlavor("m1.tiny", 512, 1, 1, "1"), SeedFlavor("m1.small", 2048, 1, 20, "2"),
            SeedFlavor("m1.medium", 4096, 2, 40, "3"), SeedFlavor("m1.large", 8192, 4, 80, "4"),
            SeedFlavor("m1.xlarge", 16384, 8, 160, "5")]


def default_images() -> list[SeedImage]:
    return [SeedImage("cirros", 21430272, "2024-01-10T09:00:00Z", min_disk=1,
                      properties={"os_distro": "cirros", "hw_rng_model": "virtio"}),
            SeedImage("ubuntu", 651165696, "2024-01-11T09:00:00Z", min_disk=10, min_ram=512,
                      properties={"os_distro": "ubuntu", "os_version": "24.04"})]


DEFAULT_COMPUTE_QUOTA: dict[str, int] = {
                         "instances": 10, "cores": 20, "ram": 51200, "metadata_items": 128,
                         "key_pairs": 100, "server_groups": 10, "server_group_members": 10,
                         "injected_files": 5, "injected_file_content_bytes": 10240,
                         "security_groups": 10, "security_group_rules": 20,
                         "floating_ips": 10}


def default_quota() -> dict[str, int]:
    return dict(DEFAULT_COMPUTE_QUOTA)


def image_record(image: SeedImage, owner_id: str) -> dict[str, Any]:
    """The Glance image a :class:`SeedImage` makes (the object of kind ``"image"``)."""
    image_id = image.id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"simcloud/image/{image.name}"))
    digest = f"{image.name}/{image.size}".encode()
    return {"id": image_id, "name": image.name, "status": "active",
            "visibility": image.visibility, "protected": False, "os_hidden": False,
            "owner": owner_id, "project_id": owner_id, "size": image.size,
            "virtual_size": None, "disk_format": image.disk_format,
            "container_format": image.container_format, "min_disk": image.min_disk,
            "min_ram": image.min_ram,
            "checksum": hashlib.md5(digest, usedforsecurity=False).hexdigest(),
            "os_hash_algo": "sha512", "os_hash_value": hashlib.sha512(digest).hexdigest(),
            "tags": list(image.tags), "created_at": image.created_at,
            "updated_at": image.created_at, **image.properties}


def flavor_record(flavor: SeedFlavor) -> dict[str, Any]:
    """The Nova flavor a :class:`SeedFlavor` makes (the object of kind ``"flavor"``)."""
    return {"id": flavor.id, "name": flavor.name, "ram": flavor.ram, "vcpus": flavor.vcpus,
            "disk": flavor.disk, "ephemeral": flavor.ephemeral, "swap": flavor.swap,
            "rxtx_factor": flavor.rxtx_factor, "is_public": flavor.is_public,
            "disabled": False, "description": flavor.description,
            "extra_specs": dict(flavor.extra_specs), "project_id": None}


def service_objects(seed: Seed, project_id: Callable[[str], str],
                    ) -> list[tuple[str, dict[str, Any]]]:
    """The (kind, object) pairs of the services' seeds; ``project_id(name)`` gives (making
    it if need be) the id of a project."""
    found: list[tuple[str, dict[str, Any]]] = [
        ("flavor", flavor_record(f)) for f in seed.flavors]
    found += [("image", image_record(i, project_id(i.owner))) for i in seed.images]
    found += [("availability_zone", {"id": name, "name": name, "available": True,
                                     "hosts": [f"compute-{name}"], "project_id": None})
              for name in seed.availability_zones]
    found.append(("compute_quota", {"id": "default", "project_id": None,
                                    **seed.compute_quota}))
    if seed.network_quota:
        found.append(("network_quota", {"id": "default", "project_id": None,
                                        "limits": dict(seed.network_quota)}))
    if seed.volume_quota:
        found.append(("volume_quota", {"id": "default", "project_id": None,
                                       **seed.volume_quota}))
    return found


def services_from_mapping(data: dict[str, Any]) -> dict[str, Any]:
    """The services' part of a seed file: ``flavors: [{name, ram, vcpus, disk, id, ...}]``,
    ``images: [{name, size, created_at, ...}]``, ``availability_zones: [names]``,
    ``compute_quota: {instances, cores, ram, ...}`` (merged over the default),
    ``network_quota: {port, network, ...}`` (Neutron's default limits), ``volume_quota:
    {volumes, gigabytes, ...}`` (Cinder's); each key left out keeps the default."""
    found: dict[str, Any] = {}
    if data.get("flavors") is not None:
        found["flavors"] = [SeedFlavor(**f) for f in data["flavors"]]
    if data.get("images") is not None:
        found["images"] = [SeedImage(**i) for i in data["images"]]
    if data.get("availability_zones") is not None:
        found["availability_zones"] = list(data["availability_zones"])
    if data.get("compute_quota") is not None:
        found["compute_quota"] = {**DEFAULT_COMPUTE_QUOTA, **data["compute_quota"]}
    if data.get("network_quota") is not None:
        found["network_quota"] = {str(k): int(v) for k, v in data["network_quota"].items()}
    if data.get("volume_quota") is not None:
        found["volume_quota"] = {str(k): int(v) for k, v in data["volume_quota"].items()}
    if data.get("networks") is not None:  # Neutron: [{name, cidr, gateway_ip, pool_start, ...}]
        found["networks"] = [SeedNetwork(**n) for n in data["networks"]]
    return found
