"""Stacks and the templates they are made from: the store's part of a transaction for them.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Stacks`` protocol by
the services (create, update, delete, list, show), the engine (a traversal's outcome) and the
API's statistics. A template is stored once, addressed by the hash of its content
(:func:`convergence.ports.views.template_id`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from convergence.errors import Conflict
from convergence.ports.views import StackView, TemplateContent, template_id
from convergence.store import dialect
from convergence.store.rows import (
    CHUNK,
    STACK_WITHOUT_OUTPUTS,
    T_RES,
    T_STACK,
    T_TEMPLATE,
    TxPart,
    chunks,
    stack_view,
)
from convergence.store.sealed_templates import opened_content, sealed_content

_STACK = select(T_STACK).where(T_STACK.c.id == bindparam("id"))
# FOR NO KEY UPDATE on PostgreSQL (see ``dialect.lock_no_key``); SQLite renders no lock.
_LOCK_STACK = _STACK.with_for_update(key_share=True)
_BARE_STACK = select(*STACK_WITHOUT_OUTPUTS).where(T_STACK.c.id == bindparam("id"))
_LOCK_BARE_STACK = _BARE_STACK.with_for_update(key_share=True)


class StackQueries(TxPart):
    # templates ----------------------------------------------------------------------------
    def put_template(self, content: TemplateContent, description: str | None = None,
                     shown_parameters: Mapping[str, str] | None = None,
                     hidden: Collection[str] = ()) -> str:
        """Store a desired state once (its id is its hash); ``description``: its template's,
        kept beside it for the stack list; ``shown_parameters``: its parameters as a stack
        show gives them, kept so that a show parses no template; ``hidden``: the parameters
        whose values are kept encrypted (``store/sealed_templates.py``)."""
        tid = template_id(content)
        exists = self.conn.execute(select(T_TEMPLATE.c.id).where(T_TEMPLATE.c.id == tid))
        if exists.first() is None:
            parameters, environments, files = sealed_content(self.sealer, content, hidden)
            # Two requests of one content (two stacks made from one template) may both find
            # it missing: the second insert does nothing rather than fail on the key.
            dialect.insert_or_ignore(self.conn, T_TEMPLATE, "id", dict(
                id=tid, text=content.text, files=files,
                environments=environments, parameters=parameters,
                created_at=self.now, description=description,
                scaling=dict(content.scaling) if content.scaling else None,
                shown_parameters=dict(shown_parameters) if shown_parameters is not None
                else None))
        return tid

    def template_descriptions(self, tids: Iterable[str]) -> dict[str, str | None]:
        """The description of each template, in one query per chunk of ids (None: stored
        before descriptions were)."""
        found: dict[str, str | None] = {}
        for chunk in chunks(sorted(set(tids))):
            rows = self.conn.execute(select(T_TEMPLATE.c.id, T_TEMPLATE.c.description)
                                     .where(T_TEMPLATE.c.id.in_(chunk)))
            found.update({row.id: row.description for row in rows})
        return found

    def shown_parameters(self, tid: str) -> dict[str, str] | None:
        """The template's parameters as a stack show gives them (None: stored before they
        were kept). Like the description, read without the template's text."""
        shown = self.conn.execute(select(T_TEMPLATE.c.shown_parameters)
                                  .where(T_TEMPLATE.c.id == tid)).scalar()
        return dict(shown) if shown is not None else None

    def template(self, tid: str) -> TemplateContent:
        row = self.conn.execute(select(T_TEMPLATE).where(T_TEMPLATE.c.id == tid)).one()
        return opened_content(self.sealer, row)

    # stacks -------------------------------------------------------------------------------
    def insert_stack(self, stack_id: str, tenant: str, name: str, *, timeout_mins: int | None,
                     disable_rollback: bool) -> None:
        """Raises Conflict when the tenant has a live stack of that name (the unique index
        decides, so two creates racing on one name cannot both pass a look-up first)."""
        try:
            self.conn.execute(insert(T_STACK).values(
                id=stack_id, name=name, tenant=tenant, generation=0, observed_generation=0,
                action="INIT", status="COMPLETE", status_reason="", outputs={},
                timeout_mins=timeout_mins, disable_rollback=disable_rollback,
                created_at=self.now, updated_at=self.now))
        except IntegrityError as exc:
            if not dialect.name_taken(exc):
                raise
            raise Conflict(f"The Stack ({name}) already exists.") from None

    def stack(self, stack_id: str, *, lock: bool = False,
              outputs: bool = True) -> StackView | None:
        query = (_LOCK_STACK if lock else _STACK) if outputs else \
            (_LOCK_BARE_STACK if lock else _BARE_STACK)
        row = self.conn.execute(query, {"id": stack_id}).first()
        return stack_view(row, self.sealer) if row is not None else None

    def find_stack(self, tenant: str, name_or_id: str) -> StackView | None:
        live = T_STACK.c.deleted_at.is_(None)
        row = self.conn.execute(select(T_STACK).where(
            T_STACK.c.tenant == tenant,
            or_(and_(T_STACK.c.name == name_or_id, live), T_STACK.c.id == name_or_id),
        ).order_by(T_STACK.c.created_at.desc())).first()
        return stack_view(row, self.sealer) if row is not None else None

    def stacks(self, tenant: str, *, include_deleted: bool = False) -> list[StackView]:
        query = select(T_STACK).where(T_STACK.c.tenant == tenant)
        if not include_deleted:
            query = query.where(T_STACK.c.deleted_at.is_(None))
        return [stack_view(r, self.sealer)
                for r in self.conn.execute(query.order_by(T_STACK.c.created_at))]

    def stacks_by_id(self, ids: Iterable[str]) -> dict[str, StackView]:
        """The stacks (deleted ones too) with these ids."""
        found: dict[str, StackView] = {}
        for chunk in chunks(sorted(set(ids)), CHUNK):
            for row in self.conn.execute(select(T_STACK).where(T_STACK.c.id.in_(chunk))):
                found[row.id] = stack_view(row, self.sealer)
        return found

    def stacks_to_observe(self, before: float, limit: int) -> list[StackView]:
        """Stacks opted in to the observer, at rest, not looked at since ``before``: the ones
        looked at longest ago first."""
        query = select(T_STACK).where(
            T_STACK.c.observe.is_(True), T_STACK.c.deleted_at.is_(None),
            T_STACK.c.status != "IN_PROGRESS",
            or_(T_STACK.c.observed_at.is_(None), T_STACK.c.observed_at < before),
        ).order_by(T_STACK.c.observed_at.is_not(None), T_STACK.c.observed_at).limit(limit)
        return [stack_view(r, self.sealer) for r in self.conn.execute(query)]

    def spent_trusts(self, limit: int) -> list[StackView]:
        """Deleted (or abandoned) stacks that still name a trust: one whose deletion did not
        happen (a process died after the stack's end, or the cloud refused for now)."""
        # A nested stack uses its top-level stack's trust: that one's end deletes it.
        query = select(T_STACK).where(T_STACK.c.trust_id.is_not(None),
                                      T_STACK.c.deleted_at.is_not(None),
                                      T_STACK.c.parent_id.is_(None)).limit(limit)
        return [stack_view(r, self.sealer) for r in self.conn.execute(query)]

    def child_stack(self, parent_record_id: int) -> StackView | None:
        """The nested stack a resource record made (the newest, if it made several)."""
        row = self.conn.execute(select(T_STACK).where(
            T_STACK.c.parent_record_id == parent_record_id,
        ).order_by(T_STACK.c.created_at.desc()).limit(1)).first()
        return stack_view(row, self.sealer) if row is not None else None

    def child_stacks(self, stack_id: str, *, in_progress: bool = False) -> list[StackView]:
        """The live nested stacks of a stack (``in_progress``: those with a request under
        way only)."""
        query = select(T_STACK).where(T_STACK.c.parent_id == stack_id,
                                      T_STACK.c.deleted_at.is_(None))
        if in_progress:
            query = query.where(T_STACK.c.status == "IN_PROGRESS")
        return [stack_view(r, self.sealer)
                for r in self.conn.execute(query.order_by(T_STACK.c.id))]

    def tree_resources(self, root_id: str) -> int:
        """The resource records of a whole tree of stacks (a top-level stack and every
        nested stack below it), deleted stacks left out."""
        in_tree = select(T_STACK.c.id).where(
            or_(T_STACK.c.id == root_id, T_STACK.c.root_id == root_id),
            T_STACK.c.deleted_at.is_(None))
        return int(self.conn.execute(select(func.count()).select_from(T_RES).where(
            T_RES.c.stack_id.in_(in_tree), T_RES.c.replaced_by.is_(None))).scalar() or 0)

    def update_stack(self, stack_id: str, **values: Any) -> None:
        self.conn.execute(update(T_STACK).where(T_STACK.c.id == stack_id)
                          .values(updated_at=self.now, **values))

    def finish_stack(self, stack_id: str, traversal_id: str, *,
                     secret_outputs: Collection[str] = (), **values: Any) -> bool:
        """Set the outcome, only if this traversal is still the stack's current one;
        ``secret_outputs``: the outputs whose values are kept encrypted."""
        if secret_outputs and isinstance(values.get("outputs"), Mapping):
            values["outputs"] = self.sealer.seal_members(values["outputs"], secret_outputs)
        result = self.conn.execute(update(T_STACK).where(
            T_STACK.c.id == stack_id, T_STACK.c.traversal_id == traversal_id,
        ).values(updated_at=self.now, **values))
        return result.rowcount == 1

    def stack_counts(self) -> dict[str, int]:
        """Live (not deleted) stacks by ``ACTION_STATUS``, over every tenant (metrics)."""
        query = select(T_STACK.c.action, T_STACK.c.status, func.count()) \
            .where(T_STACK.c.deleted_at.is_(None)) \
            .group_by(T_STACK.c.action, T_STACK.c.status)
        return {f"{a}_{s}": int(n) for a, s, n in self.conn.execute(query)}
