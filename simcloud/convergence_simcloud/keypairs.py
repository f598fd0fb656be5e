"""Nova's key pairs in the simulated cloud: ``/os-keypairs`` list, create (generated or
imported), show and delete, with Nova's shapes from 2.1 to 2.61.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``; Nova's
servers module reads the records (kind ``"keypair"``, id ``<user_id>/<name>``) to check a
``key_name``. A key pair belongs to a user, not a project: its record holds ``name``,
``user_id``, ``project_id`` (the project it was made in), ``public_key``, ``fingerprint``,
``type`` (``ssh`` or ``x509``) and ``created_at``. Created without ``public_key``, Nova
generates one and answers the ``private_key`` once; an imported key must parse (400
``Keypair data is invalid`` otherwise). Microversions: 2.2 adds ``type`` and answers 201/204
instead of 200/202; 2.10 lets an admin act for another ``user_id``; 2.35 paginates the list
(``limit``, ``marker`` by name, ``keypairs_links``). The ``key_pairs`` quota counts the user's
pairs; a ``quota_exceeded`` fault rule (service ``compute``, kind ``keypair``) refuses a create
the same way (403).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import re
from typing import Any
from urllib.parse import urlencode

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from fastapi import APIRouter, Request, Response

from convergence_simcloud import faults
from convergence_simcloud.compute import MAX_LIMIT, Microversion, nova_error
from convergence_simcloud.compute_quotas import (
    answer,
    forbidden,
    nova_body,
    over_quota,
    quota_of,
)
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
KIND = "keypair"
NAME = re.compile(r"^[a-zA-Z0-9 _-]+$")
TYPES = ("ssh", "x509")


def stamp(when: float) -> str:
    """Nova's database timestamp: ``2014-05-07T12:06:13.681238``."""
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")


def _colons(digest: str) -> str:
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def _invalid(reason: str) -> Exception:
    return nova_error(400, f"Keypair data is invalid: {reason}")


def ssh_fingerprint(public_key: str) -> str:
    """The MD5 fingerprint Nova shows for an OpenSSH public key (400 when it does not parse)."""
    try:
        serialization.load_ssh_public_key(public_key.strip().encode())
        blob = base64.b64decode(public_key.split()[1])
    except (ValueError, IndexError, binascii.Error, TypeError):
        raise _invalid("failed to generate fingerprint") from None
    return _colons(hashlib.md5(blob, usedforsecurity=False).hexdigest())


def x509_fingerprint(certificate: str) -> str:
    """The SHA-1 fingerprint of a PEM certificate (400 when it does not parse)."""
    try:
        cert = x509.load_pem_x509_certificate(certificate.encode())
    except ValueError as error:
        raise _invalid(f"failed to generate X509 fingerprint. Error message: {error}") from None
    return _colons(binascii.hexlify(cert.fingerprint(hashes.SHA1())).decode())


def _private_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode()


def generate(key_type: str, user_id: str) -> tuple[str, str, str]:
    """A new key as Nova makes it: (private key, public key or certificate, fingerprint)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ssh":
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                               serialization.PublicFormat.OpenSSH).decode()
        public = f"{public} Generated-by-Nova"
        return _private_pem(key), public, ssh_fingerprint(public)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_id)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    return _private_pem(key), pem, x509_fingerprint(pem)


# -- views -----------------------------------------------------------------------------------

def _view(keypair: Record, keys: tuple[str, ...], version: tuple[int, int]) -> dict[str, Any]:
    body = {k: keypair.get(k) for k in keys}
    if version >= (2, 2):
        body["type"] = keypair["type"]
    return body


def show_view(keypair: Record, version: tuple[int, int]) -> dict[str, Any]:
    body = _view(keypair, ("name", "public_key", "fingerprint", "user_id"), version)
    body.update({"created_at": keypair["created_at"], "deleted": False, "deleted_at": None,
                 "id": keypair["_sim"]["serial"], "updated_at": None})
    return body


# -- whose key pairs -------------------------------------------------------------------------

def _user_of(request: Request, who: Caller, version: tuple[int, int], action: str,
             body: dict[str, Any] | None = None) -> str:
    """The user whose key pairs are meant: the caller's, or (2.10+) an admin's choice."""
    asked = None
    if version >= (2, 10):
        asked = (body or {}).get("user_id") if body is not None else \
            request.query_params.get("user_id")
    if asked and asked != who.user_id:
        if not who.is_admin:
            raise forbidden(f"os-keypairs:{action}")
        return str(asked)
    return who.user_id


def _not_found(name: str, user_id: str) -> Exception:
    return nova_error(404, f"Keypair {name} not found for user {user_id}")


def get_keypair(cloud: SimCloud, user_id: str, name: str) -> Record:
    """The user's key pair ``name`` (404 if none). Call under the lock."""
    found = cloud.kind(KIND).get(f"{user_id}/{name}")
    if found is None:
        raise _not_found(name, user_id)
    return found


# -- routes ----------------------------------------------------------------------------------

@router.get("/os-keypairs")
def list_keypairs(request: Request, who: Authenticated,
                  version: Microversion) -> dict[str, Any]:
    user_id = _user_of(request, who, version, "index")
    cloud = cloud_of(request)
    with cloud.locked():
        rows = sorted((k for k in cloud.kind(KIND).values() if k["user_id"] == user_id),
                      key=lambda k: k["name"])
    links: list[dict[str, str]] = []
    if version >= (2, 35):
        params = request.query_params
        marker = params.get("marker")
        if marker is not None:
            at = next((n for n, k in enumerate(rows) if k["name"] == marker), None)
            if at is None:
                raise nova_error(400, f"Marker {marker} could not be found.")
            rows = rows[at + 1:]
        raw = params.get("limit")
        try:
            limit = MAX_LIMIT if raw is None else int(raw)
            if limit < 0:
                raise ValueError
        except ValueError:
            raise nova_error(400, f"Invalid input for query parameters limit. Value: {raw}."
                             ) from None
        limit = min(limit or MAX_LIMIT, MAX_LIMIT)
        rows = rows[:limit]
        if rows and len(rows) == limit:
            query = [(k, v) for k, v in params.multi_items() if k != "marker"]
            href = (str(request.base_url).rstrip("/") + request.url.path + "?" +
                    urlencode([*query, ("marker", rows[-1]["name"])]))
            links.append({"rel": "next", "href": href})
    body: dict[str, Any] = {"keypairs": [
        {"keypair": _view(k, ("name", "public_key", "fingerprint"), version)} for k in rows]}
    if links:
        body["keypairs_links"] = links
    return body


def _checked_body(body: dict[str, Any], version: tuple[int, int]) -> tuple[str, str]:
    """The new key pair's name and type (Nova's 400 for what its schema refuses)."""
    allowed = {"name", "public_key"}
    if version >= (2, 2):
        allowed.add("type")
    if version >= (2, 10):
        allowed.add("user_id")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise nova_error(400, f"Invalid input for field/attribute keypair. Value: {body}. "
                              f"Additional properties are not allowed "
                              f"({', '.join(repr(k) for k in unknown)} "
                              f"{'was' if len(unknown) == 1 else 'were'} unexpected)")
    name = body.get("name")
    if not isinstance(name, str):
        raise nova_error(400, f"Invalid input for field/attribute keypair. Value: {body}. "
                              "'name' is a required property")
    if not 1 <= len(name) <= 255 or not NAME.match(name):
        raise nova_error(400, f"Invalid input for field/attribute name. Value: {name}. "
                              f"'{name}' does not match '{NAME.pattern}'")
    key_type = body.get("type", "ssh")
    if key_type not in TYPES:
        raise nova_error(400, f"Invalid input for field/attribute type. Value: {key_type}. "
                              f"'{key_type}' is not one of ['ssh', 'x509']")
    public = body.get("public_key")
    if public is not None and not isinstance(public, str):
        raise nova_error(400, f"Invalid input for field/attribute public_key. Value: "
                              f"{public}. {public!r} is not of type 'string'")
    return name, str(key_type)


@router.post("/os-keypairs")
async def create_keypair(request: Request, who: Authenticated,
                         version: Microversion) -> Response:
    body = await nova_body(request, "keypair")
    name, key_type = _checked_body(body, version)
    user_id = _user_of(request, who, version, "create", body)
    public = body.get("public_key")
    private = None
    if public is None:
        private, public, fingerprint = generate(key_type, user_id)
    elif key_type == "x509":
        fingerprint = x509_fingerprint(public)
    else:
        fingerprint = ssh_fingerprint(public)
    cloud = cloud_of(request)
    with cloud.locked():
        rows = cloud.kind(KIND)
        record: Record = {
            "id": f"{user_id}/{name}", "name": name, "user_id": user_id,
            "project_id": who.project_id, "public_key": public, "fingerprint": fingerprint,
            "type": key_type, "created_at": stamp(cloud.now()),
            "_sim": {"made_at": cloud.now(),
                     "serial": 1 + max((k["_sim"]["serial"] for k in rows.values()),
                                       default=0)}}
        limit = quota_of(cloud, who.project_id)["key_pairs"]
        owned = sum(1 for k in rows.values() if k["user_id"] == user_id)
        rule = faults.quota_rule(cloud, "compute", KIND, record)
        if rule is not None or (limit != -1 and owned + 1 > limit):
            raise over_quota((rule.message if rule is not None else "")
                             or "Quota exceeded, too many key pairs.")
        if record["id"] in rows:
            raise nova_error(409, f"Key pair '{name}' already exists.")
        rows[record["id"]] = record
    cloud.changed()
    shown = _view(record, ("name", "public_key", "fingerprint", "user_id"), version)
    if private is not None:
        shown["private_key"] = private
    return answer(201 if version >= (2, 2) else 200, version, {"keypair": shown})


@router.get("/os-keypairs/{name}")
def show_keypair(name: str, request: Request, who: Authenticated,
                 version: Microversion) -> dict[str, Any]:
    user_id = _user_of(request, who, version, "show")
    cloud = cloud_of(request)
    with cloud.locked():
        return {"keypair": show_view(get_keypair(cloud, user_id, name), version)}


@router.delete("/os-keypairs/{name}")
def delete_keypair(name: str, request: Request, who: Authenticated,
                   version: Microversion) -> Response:
    user_id = _user_of(request, who, version, "delete")
    cloud = cloud_of(request)
    with cloud.locked():
        found = get_keypair(cloud, user_id, name)
        del cloud.kind(KIND)[found["id"]]
    cloud.changed()
    return answer(204 if version >= (2, 2) else 202, version)
