"""Deciding what one node must do: a pure function of desired and observed state.

Level-based: the step re-reads the template (desired) and the record (observed) and acts on
the difference; it never branches on which message woke it, so redelivery, duplicates and
crashes are harmless. Table-tested in ``tests/unit/engine/test_decide.py``.

Callers: the step (:mod:`convergence.engine.step`) and the preview of a create or an update
(``convergence.services.preview``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Action(Enum):
    CREATE = "CREATE"  # bring a never-created (or failed-to-create) record into being
    UPDATE = "UPDATE"  # change it in place
    # Create a new version; the old one is deleted by its cleanup node (or its delete, under
    # way, is seen to its end there).
    REPLACE = "REPLACE"
    DELETE = "DELETE"  # remove it from the cloud
    POLL = "POLL"  # an operation of this record is under way: look at it again
    NOTHING = "NOTHING"  # already as wanted (record it as converged to the new template)
    FORGET = "FORGET"  # never created: drop the record without touching the cloud


@dataclass(frozen=True, slots=True)
class Observed:
    """A record as stored."""

    type: str
    action: str  # INIT CREATE UPDATE DELETE CHECK
    status: str  # COMPLETE IN_PROGRESS FAILED
    physical_id: str | None
    properties: Mapping[str, Any]
    template_id: str | None
    operation: Mapping[str, Any] | None  # a pending action's poll state
    replaced_by: int | None = None
    # Whether any step ever claimed the record before this one: if so, an interrupted
    # attempt may have created something the record does not know of yet.
    worked_on: bool = True

    @property
    def created(self) -> bool:
        """Whether something may exist in the cloud for this record."""
        return self.physical_id is not None or self.operation is not None or \
            self.action not in ("INIT",)


@dataclass(frozen=True, slots=True)
class Desired:
    """A resource as the new template wants it."""

    type: str
    properties: Mapping[str, Any]
    template_id: str


def decide_converge(observed: Observed, desired: Desired, needs_replace: bool,
                    renew: bool = False) -> Action:
    """What a converge node does. ``needs_replace``: the plugin's verdict on the change;
    ``renew``: a type replaced by every stack update (``UpdateWaitConditionHandle``), in one
    it was not yet replaced by."""
    if observed.operation is not None and observed.operation.get("action") != "DELETE":
        return Action.POLL
    if observed.action == "INIT" or (observed.action == "CREATE" and observed.status == "FAILED"):
        return Action.CREATE
    if observed.action == "DELETE":
        if observed.status == "COMPLETE":
            return Action.CREATE  # deleted underneath us: rebuild
        # A delete was started (by a traversal since superseded) and not seen to its end:
        # what it deletes is the old version's, to finish by its cleanup (whose events end
        # that physical resource's story); the resource is made anew beside it.
        return Action.REPLACE
    if observed.type != desired.type:
        return Action.REPLACE
    if observed.action == "CHECK" and observed.status == "FAILED":
        return Action.REPLACE  # marked unhealthy (or failed a check): build a new one
    if observed.status == "FAILED":
        # A failed update left the resource in an unknown state: try the change again.
        return Action.REPLACE if needs_replace else Action.UPDATE
    if renew:
        return Action.REPLACE
    if dict(observed.properties) == dict(desired.properties):
        return Action.NOTHING
    return Action.REPLACE if needs_replace else Action.UPDATE


def decide_cleanup(observed: Observed, wanted: bool) -> Action:
    """What a cleanup node does. ``wanted``: the record is the one the new template keeps."""
    if wanted and observed.replaced_by is None:
        return Action.NOTHING
    if observed.operation is not None and observed.operation.get("action") == "DELETE":
        return Action.POLL
    if observed.action == "INIT" and observed.operation is None and not observed.worked_on:
        return Action.FORGET
    if observed.action == "DELETE" and observed.status == "COMPLETE":
        return Action.FORGET
    # Anything else may exist in the cloud, known or not: the plugin deletes by physical id,
    # or finds what an interrupted attempt created by the record's key.
    return Action.DELETE
