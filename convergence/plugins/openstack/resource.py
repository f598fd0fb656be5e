"""The base of every OpenStack resource type: create, poll, update and delete as the engine's
plugin port asks, written once over a few calls each type supplies.

Callers: the resource types of this package subclass :class:`OpenStackResource`; the engine
calls them through the plugin port (``convergence.plugins.base``).

What a type supplies: :meth:`~OpenStackResource.find` (what an interrupted attempt of the same
record made, by the record's key, :func:`owner_tag`), :meth:`~OpenStackResource.make` (the
create call), :meth:`~OpenStackResource.fetch` (a read by physical id),
:meth:`~OpenStackResource.remove` (the delete call), :meth:`~OpenStackResource.state` (where an
object stands: ready, building or failed with the cloud's message) and
:meth:`~OpenStackResource.attributes`; and :meth:`~OpenStackResource.change` for the
properties it updates in place (the schema says which: the others replace).

What the base does with them, the same for every type:

- create is idempotent: what the record's key finds is adopted rather than made again, so a
  worker killed between the cloud call and the database write leaves exactly one object;
- waiting is polling: an object still building is ``Progress.pending`` with the type's delay,
  and the engine calls :meth:`poll` again later, on any worker; no thread sleeps;
- a delete is complete only when the cloud answers 404 for the object;
- every cloud call is translated once (:mod:`convergence.plugins.openstack.errors`): 404 is
  absence, a refusal for now is ``RetryLater`` with the delay the cloud asked for, anything
  else the cloud refused fails the resource with the cloud's own message;
- right before each change it makes in the cloud, it checks that the engine still holds the
  resource's lease (``ctx.check_lease``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from convergence.plugins.base import (
    CREATE,
    DELETE,
    REPAIR,
    BackendFactory,
    ConstraintCheck,
    Observation,
    PluginBase,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.openstack import clouds
from convergence.plugins.openstack.constraints import CHECKS
from convergence.plugins.openstack.errors import Absent, translated

READY, BUILDING, FAILED = "ready", "building", "failed"
OWNER_PREFIX = "convergence:"  # 12 characters: with a stack id and a record id, under 60


@dataclass(frozen=True, slots=True)
class State:
    """Where a cloud object stands: ``READY``, ``BUILDING`` or ``FAILED`` (with why)."""

    phase: str
    message: str = ""


def owner_tag(ctx: PluginContext) -> str:
    """The tag that carries the record's key on what it made (Nova's tags allow no ``/``)."""
    return OWNER_PREFIX + ctx.owner.replace("/", ":")


class OpenStackResource(PluginBase):
    """A resource type whose objects live in an OpenStack cloud."""

    backends: ClassVar[Mapping[str, BackendFactory]] = {clouds.CLOUDS: clouds.build}
    constraints: ClassVar[Mapping[str, ConstraintCheck]] = CHECKS
    # A server gone behind the engine's back or in ERROR is what the observer is for.
    observe_policy: ClassVar[str] = REPAIR
    noun: ClassVar[str] = "resource"  # what the type makes, in messages ("server")
    poll_delay: ClassVar[float] = 1.0  # how long until a building object is looked at again
    delete_delay: ClassVar[float] = 0.5  # how long until a deleting object is looked at again

    # -- what a type supplies ------------------------------------------------------------------
    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        """What an earlier attempt of this record made (by :func:`owner_tag`), if anything."""
        raise NotImplementedError

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        """The create call; answers the cloud's object (with at least its ``id``)."""
        raise NotImplementedError

    def fetch(self, conn: Any, physical_id: str) -> Any:
        """The object ``physical_id``; raises (the SDK's 404, translated to :class:`Absent`)
        when it is not there."""
        raise NotImplementedError

    def remove(self, conn: Any, physical_id: str) -> None:
        """The delete call (a 404 is translated to :class:`Absent`: already gone)."""
        raise NotImplementedError

    def state(self, obj: Any) -> State:
        """Where ``obj`` stands; most objects are ready as soon as they exist."""
        return State(READY)

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        """The attributes to store for ``obj`` (``show`` included)."""
        return {"show": _plain(obj)}

    def actual(self, obj: Any) -> dict[str, Any]:
        """The properties ``obj`` shows as they are now (those a type can read back and a
        user could change behind the engine's back); compared by a check with the record."""
        return {}

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        """Update ``physical_id`` in place from ``old`` to ``new`` (only properties whose schema
        allows it differ); answers the object after the change."""
        raise ResourceFailure(f"{self.schema.name} cannot be updated in place")

    # -- the plugin port -----------------------------------------------------------------------
    def connection(self, ctx: PluginContext) -> Any:
        backend = ctx.backends.get(clouds.CLOUDS)
        if backend is None:
            raise ResourceFailure("no cloud is configured: set OS_CLOUD (a clouds.yaml entry) "
                                  "or the OS_* variables")
        return backend.connection(ctx.scope)

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        try:
            with translated(f"creating {self.noun} {ctx.resource_name}"):
                # A record's first claim: no earlier attempt can have made anything to find.
                obj = None if ctx.first_attempt else self.find(conn, ctx, props)
                if obj is None:
                    ctx.check_lease()
                    obj = self.make(conn, ctx, props)
        except Absent as exc:  # something the create names is not there (a network...)
            raise ResourceFailure(str(exc)) from None
        return self.progress(conn, obj, props, CREATE)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return self.create(ctx, new)
        conn = self.connection(ctx)
        try:
            with translated(f"updating {self.noun} {physical_id}"):
                ctx.check_lease()
                obj = self.change(conn, ctx, physical_id, old, new)
        except Absent:
            raise ResourceFailure(f"{self.noun} {physical_id} no longer exists") from None
        return self.progress(conn, obj, new, "UPDATE")

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        if action == DELETE:
            return self._deleting(ctx, conn, physical_id)
        if physical_id is None:  # nothing was made yet when the step was interrupted
            return self.create(ctx, props)
        try:
            with translated(f"reading {self.noun} {physical_id}"):
                obj = self.fetch(conn, physical_id)
        except Absent:
            raise ResourceFailure(f"{self.noun} {physical_id} vanished while it was being "
                                  f"made") from None
        return self.progress(conn, obj, props, action)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        if physical_id is None:
            with translated(f"looking for {self.noun} {ctx.resource_name}"):
                found = self.find(conn, ctx, props)
            if found is None:
                return Progress.finished(None)
            physical_id = str(found.id)
        try:
            with translated(f"deleting {self.noun} {physical_id}"):
                ctx.check_lease()
                self.remove(conn, physical_id)
        except Absent:
            return Progress.finished(physical_id)
        return self._deleting(ctx, conn, physical_id)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        conn = self.connection(ctx)
        try:
            with translated(f"deleting {self.noun} {physical_id}"):
                ctx.check_lease()
                self.remove(conn, physical_id)
        except Absent:
            return

    def adopt(self, ctx: PluginContext, physical_id: str,
              props: Mapping[str, Any]) -> Progress:
        if type(self).fetch is OpenStackResource.fetch:
            return Progress.finished(physical_id, {})  # reads its objects its own way
        conn = self.connection(ctx)
        try:
            with translated(f"reading {self.noun} {physical_id}"):
                obj = self.fetch(conn, physical_id)
                return Progress.finished(physical_id, self.attributes(conn, obj, props))
        except Absent:
            raise ResourceFailure(f"external {self.noun} {physical_id} not found in the "
                                  "cloud") from None

    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None:
        if type(self).fetch is OpenStackResource.fetch:
            return None  # a type that reads its objects its own way observes its own way
        conn = self.connection(ctx)
        try:
            with translated(f"reading {self.noun} {physical_id}"):
                obj = self.fetch(conn, physical_id)
        except Absent:
            return Observation.missing(f"{self.noun} {physical_id} not found in the cloud")
        except ResourceFailure as exc:  # refused to tell (403...): a check that failed
            return Observation.broken(str(exc))
        found = self.state(obj)
        actual = {k: v for k, v in self.actual(obj).items() if k in props}
        if found.phase == FAILED:
            return Observation.broken(f"{self.noun} {physical_id} is in ERROR"
                                      + (f": {found.message}" if found.message else ""),
                                      actual)
        return Observation.fine(actual)

    # -- shared steps --------------------------------------------------------------------------
    def progress(self, conn: Any, obj: Any, props: Mapping[str, Any], action: str) -> Progress:
        """Finished, pending or failed, from where ``obj`` stands."""
        physical_id = str(obj.id)
        found = self.state(obj)
        if found.phase == FAILED:
            raise ResourceFailure(f"{self.noun} {physical_id} went to ERROR"
                                  + (f": {found.message}" if found.message else ""),
                                  physical_id=physical_id)
        if found.phase == BUILDING:
            return Progress.pending(self.poll_delay, {"phase": found.phase}, physical_id)
        with translated(f"reading {self.noun} {physical_id}"):
            attributes = self.attributes(conn, obj, props)
        return Progress.finished(physical_id, attributes)

    def _deleting(self, ctx: PluginContext, conn: Any, physical_id: str | None) -> Progress:
        """Done when the cloud answers 404; a delete the cloud refused to finish (an object
        in ``error_deleting``...) is asked for again."""
        if physical_id is None:
            return Progress.finished(None)
        try:
            with translated(f"reading {self.noun} {physical_id}"):
                obj = self.fetch(conn, physical_id)
        except Absent:
            return Progress.finished(physical_id)
        if self.state(obj).phase == FAILED:
            try:
                with translated(f"deleting {self.noun} {physical_id}"):
                    ctx.check_lease()
                    self.remove(conn, physical_id)
            except Absent:
                return Progress.finished(physical_id)
        return Progress.pending(self.delete_delay, {"phase": "deleting"}, physical_id)


def _plain(obj: Any) -> Any:
    """An SDK object as plain JSON values (what ``show`` gives)."""
    to_dict = getattr(obj, "to_dict", None)
    if to_dict is None:
        return obj
    return to_dict(computed=False)
