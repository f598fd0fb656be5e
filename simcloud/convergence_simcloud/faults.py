"""Fault rules: what makes the simulated cloud as noisy as a real one, and how services ask.

A rule pairs a *match* (service, object kind, name pattern, metadata, tag, object id, project,
method, path) with an *effect*. Object effects are applied by the service that owns the object
when it reads, creates or deletes one (``convergence_simcloud.servers``, ``volumes``, the
Neutron modules): :func:`fate` says whether an object stays building, goes ERROR or vanishes
and when; :func:`delete_rule` whether its delete hangs, answers 409 or 500; :func:`quota_rule`
whether its creation is refused for quota. Request effects (slow answers, bursts of 503, 429
with ``Retry-After``, token expiry) are applied to whole requests by
``convergence_simcloud.control``'s middleware through :func:`request_rule`. Rules live in the
cloud's ``fault_rules`` table (saved with the state); ``convergence_simcloud.control`` serves
them under ``/_sim/rules``. Every function here is called under the cloud's lock.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass, field
from typing import Any

from convergence_simcloud.state import Record, SimCloud, new_id

# Effects on the objects a rule matches.
STAY_BUILDING = "stay_building"  # never leaves BUILD / creating
ERROR_AFTER = "error_after"  # goes ERROR ``seconds`` after it was made (or the rule, if later)
VANISH_AFTER = "vanish_after"  # is gone (404) ``seconds`` after it was made (or the rule)
DELETE_HANGS = "delete_hangs"  # a delete is accepted, but the object stays in its deleting state
DELETE_CONFLICT = "delete_conflict"  # a delete answers 409
DELETE_ERROR = "delete_error"  # a delete answers 500
QUOTA_EXCEEDED = "quota_exceeded"  # a create answers the service's over-quota error
# Effects on the requests a rule matches.
SLOW = "slow"  # answered ``seconds`` late
# Done at once, answered ``seconds`` late: the window in which a client that crashes made a
# change it never heard of (what an interrupted create must find again, not make twice).
LATE_ANSWER = "late_answer"
UNAVAILABLE = "unavailable"  # 503 (``count`` times, then the rule is spent)
RATE_LIMITED = "rate_limited"  # 429 with ``Retry-After: seconds`` (``count`` times)
TOKEN_EXPIRY = "token_expiry"  # the caller's token expires: 401, a new token is needed

OBJECT_EFFECTS = (STAY_BUILDING, ERROR_AFTER, VANISH_AFTER, DELETE_HANGS, DELETE_CONFLICT,
                  DELETE_ERROR, QUOTA_EXCEEDED)
REQUEST_EFFECTS = (SLOW, LATE_ANSWER, UNAVAILABLE, RATE_LIMITED, TOKEN_EXPIRY)
EFFECTS = OBJECT_EFFECTS + REQUEST_EFFECTS
SERVICES = ("identity", "compute", "network", "volume", "image")
TABLE = "fault_rules"


class InvalidRule(ValueError):
    """A rule the control API refuses with 400 (the message names the field)."""


@dataclass
class Rule:
    """One fault rule. Unset match fields match anything."""

    effect: str
    service: str | None = None  # identity, compute, network, volume, image
    kind: str | None = None  # server, volume, port, network, router, floatingip...
    name: str | None = None  # a glob on the object's name (``web-*``)
    metadata: dict[str, str] = field(default_factory=dict)  # all must be on the object
    tag: str | None = None
    object_id: str | None = None
    project_id: str | None = None
    method: str | None = None  # request rules: GET, POST...
    path: str | None = None  # request rules: a glob on the path (``/compute/v2.1/servers*``)
    seconds: float = 0.0  # error/vanish delay, slowness, Retry-After
    message: str = ""  # the fault or error message (a default per effect when empty)
    # How many times it applies (None: until removed); for an object's fate (stay building,
    # go ERROR, vanish), how many objects it takes: the first ones it matches keep it.
    count: int | None = None
    id: str = ""
    created_at: float = 0.0
    hits: int = 0
    objects: list[str] = field(default_factory=list)  # the objects a counted fate took

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_FIELDS = {f for f in Rule.__dataclass_fields__
           if f not in ("id", "created_at", "hits", "objects")}


def parse_rule(body: Any) -> Rule:
    """A rule from the control API's JSON (:class:`InvalidRule` naming the bad field)."""
    if not isinstance(body, dict):
        raise InvalidRule("a rule is a JSON object")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise InvalidRule(f"unknown field(s) {unknown}; a rule has {sorted(_FIELDS)}")
    effect = body.get("effect")
    if effect not in EFFECTS:
        raise InvalidRule(f"effect: {effect!r} is not one of {list(EFFECTS)}")
    if body.get("service") is not None and body["service"] not in SERVICES:
        raise InvalidRule(f"service: {body['service']!r} is not one of {list(SERVICES)}")
    for name in ("seconds",):
        value = body.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InvalidRule(f"{name}: must be a number >= 0, not {value!r}")
    count = body.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                              or count < 1):
        raise InvalidRule(f"count: must be an integer >= 1, not {count!r}")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidRule("metadata: must be an object of strings")
    for name in ("service", "kind", "name", "tag", "object_id", "project_id", "method", "path",
                 "message"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise InvalidRule(f"{name}: must be a string")
    fields = {k: v for k, v in body.items() if v is not None}
    fields["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    if fields.get("method"):
        fields["method"] = fields["method"].upper()
    return Rule(**fields)


# -- the rules table -----------------------------------------------------------------------

def _table(cloud: SimCloud) -> dict[str, Record]:
    return cloud.tables.setdefault(TABLE, {})  # type: ignore[no-any-return]


def add_rule(cloud: SimCloud, rule: Rule) -> Rule:
    rule.id = rule.id or new_id()
    rule.created_at = cloud.now()
    _table(cloud)[rule.id] = rule.to_json()
    return rule


def rules(cloud: SimCloud) -> list[Rule]:
    """The live rules, oldest first."""
    return sorted((Rule(**r) for r in _table(cloud).values()), key=lambda r: r.created_at)


def remove_rule(cloud: SimCloud, rule_id: str) -> bool:
    return _table(cloud).pop(rule_id, None) is not None


def clear_rules(cloud: SimCloud) -> int:
    table = _table(cloud)
    count = len(table)
    table.clear()
    return count


def _spend(cloud: SimCloud, rule: Rule) -> None:
    """Count a use of ``rule``; a rule with a ``count`` is removed when it is spent."""
    stored = _table(cloud).get(rule.id)
    if stored is None:
        return
    stored["hits"] = stored.get("hits", 0) + 1
    if rule.count is not None and stored["hits"] >= rule.count:
        del _table(cloud)[rule.id]


# -- matching objects ----------------------------------------------------------------------

def matches_object(rule: Rule, service: str, kind: str, record: Record) -> bool:
    if rule.service is not None and rule.service != service:
        return False
    if rule.kind is not None and rule.kind != kind:
        return False
    if rule.object_id is not None and rule.object_id != record.get("id"):
        return False
    if rule.project_id is not None and rule.project_id != record.get("project_id"):
        return False
    if rule.name is not None and not fnmatch.fnmatchcase(str(record.get("name") or ""),
                                                         rule.name):
        return False
    if rule.tag is not None and rule.tag not in (record.get("tags") or []):
        return False
    metadata = record.get("metadata") or {}
    return all(str(metadata.get(k)) == v for k, v in rule.metadata.items())


def _first(cloud: SimCloud, effects: tuple[str, ...], service: str, kind: str,
           record: Record) -> Rule | None:
    for rule in rules(cloud):
        if rule.effect in effects and matches_object(rule, service, kind, record):
            return rule
    return None


@dataclass(frozen=True)
class Fate:
    """What the rules have in store for one object: the service applies it when it reads."""

    stays_building: bool = False
    error_at: float | None = None  # the moment it goes ERROR
    message: str = ""  # the fault message when it does
    vanish_at: float | None = None  # the moment it is gone


def fate(cloud: SimCloud, service: str, kind: str, record: Record, made_at: float) -> Fate:
    """The object's fate: ``made_at`` is when it was made (a clock value); a delay counts from
    it, or from the rule's making when the rule is newer."""
    stays, error_at, message, vanish_at = False, None, "", None
    for rule in rules(cloud):
        if rule.effect not in (STAY_BUILDING, ERROR_AFTER, VANISH_AFTER) or \
                not matches_object(rule, service, kind, record) or \
                not _takes(cloud, rule, str(record.get("id"))):
            continue
        at = max(made_at, rule.created_at) + rule.seconds
        if rule.effect == STAY_BUILDING:
            stays = True
        elif rule.effect == ERROR_AFTER and (error_at is None or at < error_at):
            error_at = at
            message = rule.message or "Simulated failure: the host went away."
        elif rule.effect == VANISH_AFTER and (vanish_at is None or at < vanish_at):
            vanish_at = at
    return Fate(stays, error_at, message, vanish_at)


def _takes(cloud: SimCloud, rule: Rule, object_id: str) -> bool:
    """Whether a fate rule applies to this object: always without a ``count``; with one, to
    the first ``count`` objects it matched (remembered, so their fate stays theirs)."""
    if rule.count is None or object_id in rule.objects:
        return True
    if len(rule.objects) >= rule.count:
        return False
    stored = _table(cloud).get(rule.id)
    if stored is not None:
        stored.setdefault("objects", []).append(object_id)
        stored["hits"] = len(stored["objects"])
    return True


def delete_rule(cloud: SimCloud, service: str, kind: str, record: Record) -> Rule | None:
    """The rule that changes this object's delete (its ``effect`` says how), counted as used."""
    rule = _first(cloud, (DELETE_HANGS, DELETE_CONFLICT, DELETE_ERROR), service, kind, record)
    if rule is not None:
        _spend(cloud, rule)
    return rule


def quota_rule(cloud: SimCloud, service: str, kind: str, record: Record) -> Rule | None:
    """The rule refusing this new object for quota (``record``: what it would be), counted."""
    rule = _first(cloud, (QUOTA_EXCEEDED,), service, kind, record)
    if rule is not None:
        _spend(cloud, rule)
    return rule


# -- matching requests ---------------------------------------------------------------------

def request_rule(cloud: SimCloud, service: str | None, method: str, path: str,
                 project_id: str | None) -> Rule | None:
    """The first request rule matching this request, counted as used."""
    for rule in rules(cloud):
        if rule.effect not in REQUEST_EFFECTS:
            continue
        if rule.service is not None and rule.service != service:
            continue
        if rule.method is not None and rule.method != method.upper():
            continue
        if rule.path is not None and not fnmatch.fnmatchcase(path, rule.path):
            continue
        if rule.project_id is not None and rule.project_id != project_id:
            continue
        _spend(cloud, rule)
        return rule
    return None
