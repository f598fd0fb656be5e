"""Software configs, software deployments and the engine's signing key, in the database.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Software`` protocol
by ``convergence.services.software`` (the API's software_configs and software_deployments,
the agents' reports, the deployment resources' backend) and ``convergence.services.signals``
(the signing key). Configs are immutable rows; a deployment's row is changed in place as it
is re-applied and as agents report, each change stamped ``updated_at``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any, cast

from sqlalchemy import Table, delete, func, insert, select, update

from convergence.ports.views import SoftwareConfigView, SoftwareDeploymentView
from convergence.store import dialect
from convergence.store import models as m
from convergence.store.rows import T_RES, TxPart
from convergence.store.sealing import PREFIX

T_CONFIG = cast(Table, m.SoftwareConfigRow.__table__)
T_DEPLOYMENT = cast(Table, m.SoftwareDeploymentRow.__table__)
T_KEY = cast(Table, m.ServiceKeyRow.__table__)
T_HANDLE_SIGNAL = cast(Table, m.HandleSignalRow.__table__)


def config_view(r: Any) -> SoftwareConfigView:
    return SoftwareConfigView(r.id, r.tenant, r.name, r.group, r.config, list(r.inputs or []),
                              list(r.outputs or []), dict(r.options or {}),
                              float(r.created_at), r.owner)


def deployment_view(r: Any) -> SoftwareDeploymentView:
    return SoftwareDeploymentView(
        r.id, r.tenant, r.config_id, r.server_id, r.action, r.status, r.status_reason,
        dict(r.input_values or {}), dict(r.output_values or {}), float(r.created_at),
        None if r.updated_at is None else float(r.updated_at), r.stack_user_project_id,
        r.stack_id, r.resource_name, r.owner)


class SoftwareQueries(TxPart):
    # configs ------------------------------------------------------------------------------
    def insert_config(self, config: SoftwareConfigView) -> SoftwareConfigView:
        self.conn.execute(insert(T_CONFIG).values(
            id=config.id, tenant=config.tenant, name=config.name, group=config.group,
            config=config.config, inputs=config.inputs, outputs=config.outputs,
            options=config.options, owner=config.owner, created_at=config.created_at))
        return config

    def software_config(self, config_id: str,
                        tenant: str | None = None) -> SoftwareConfigView | None:
        """A config by id (of ``tenant`` only, when given)."""
        query = select(T_CONFIG).where(T_CONFIG.c.id == config_id)
        if tenant is not None:
            query = query.where(T_CONFIG.c.tenant == tenant)
        row = self.conn.execute(query).first()
        return None if row is None else config_view(row)

    def software_configs_by_id(self, ids: Iterable[str]) -> dict[str, SoftwareConfigView]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        rows = self.conn.execute(select(T_CONFIG).where(T_CONFIG.c.id.in_(wanted)))
        return {r.id: config_view(r) for r in rows}

    def software_configs(self, tenant: str, limit: int | None = None,
                         marker: str | None = None) -> list[SoftwareConfigView]:
        """A tenant's configs, oldest first, after ``marker`` (a config id) if given."""
        query = select(T_CONFIG).where(T_CONFIG.c.tenant == tenant)
        if marker is not None:
            after = self.software_config(marker, tenant)
            if after is not None:
                query = query.where(
                    (T_CONFIG.c.created_at > after.created_at)
                    | ((T_CONFIG.c.created_at == after.created_at) & (T_CONFIG.c.id > after.id)))
        query = query.order_by(T_CONFIG.c.created_at, T_CONFIG.c.id)
        if limit is not None:
            query = query.limit(limit)
        return [config_view(r) for r in self.conn.execute(query)]

    def configs_of_owner(self, owner: str) -> list[SoftwareConfigView]:
        rows = self.conn.execute(select(T_CONFIG).where(T_CONFIG.c.owner == owner)
                                 .order_by(T_CONFIG.c.created_at, T_CONFIG.c.id))
        return [config_view(r) for r in rows]

    def delete_config(self, config_id: str) -> bool:
        return bool(self.conn.execute(
            delete(T_CONFIG).where(T_CONFIG.c.id == config_id)).rowcount)

    # deployments --------------------------------------------------------------------------
    def insert_deployment(self, dep: SoftwareDeploymentView) -> SoftwareDeploymentView:
        self.conn.execute(insert(T_DEPLOYMENT).values(
            id=dep.id, tenant=dep.tenant, config_id=dep.config_id, server_id=dep.server_id,
            action=dep.action, status=dep.status, status_reason=dep.status_reason,
            input_values=dep.input_values, output_values=dep.output_values,
            stack_user_project_id=dep.stack_user_project_id, stack_id=dep.stack_id,
            resource_name=dep.resource_name, owner=dep.owner, created_at=dep.created_at,
            updated_at=dep.updated_at))
        return dep

    def software_deployment(self, deployment_id: str, tenant: str | None = None, *,
                            lock: bool = False) -> SoftwareDeploymentView | None:
        query = select(T_DEPLOYMENT).where(T_DEPLOYMENT.c.id == deployment_id)
        if tenant is not None:
            query = query.where(T_DEPLOYMENT.c.tenant == tenant)
        if lock:
            query = dialect.lock(self.conn, query)
        row = self.conn.execute(query).first()
        return None if row is None else deployment_view(row)

    def software_deployments(self, tenant: str,
                             server_id: str | None = None) -> list[SoftwareDeploymentView]:
        """A tenant's deployments (to ``server_id`` only, when given), oldest first."""
        query = select(T_DEPLOYMENT).where(T_DEPLOYMENT.c.tenant == tenant)
        if server_id is not None:
            query = query.where(T_DEPLOYMENT.c.server_id == server_id)
        query = query.order_by(T_DEPLOYMENT.c.created_at, T_DEPLOYMENT.c.id)
        return [deployment_view(r) for r in self.conn.execute(query)]

    def deployment_of_owner(self, owner: str) -> SoftwareDeploymentView | None:
        row = self.conn.execute(select(T_DEPLOYMENT).where(T_DEPLOYMENT.c.owner == owner)
                                .order_by(T_DEPLOYMENT.c.created_at).limit(1)).first()
        return None if row is None else deployment_view(row)

    def update_deployment(self, deployment_id: str, **values: Any) -> bool:
        return bool(self.conn.execute(update(T_DEPLOYMENT).where(
            T_DEPLOYMENT.c.id == deployment_id).values(updated_at=self.now, **values)).rowcount)

    def delete_deployment(self, deployment_id: str) -> bool:
        return bool(self.conn.execute(
            delete(T_DEPLOYMENT).where(T_DEPLOYMENT.c.id == deployment_id)).rowcount)

    # wait condition handles' signals ----------------------------------------------------
    def add_handle_signal(self, handle_id: str, stack_id: str, signal_id: str | None,
                          status: str, reason: str, data: Any) -> str:
        """Keep a signal of handle ``handle_id`` (one with the id of an earlier one replaces
        it; no id: the next number, as Heat numbers them); returns its id."""
        if signal_id is None:
            count = self.conn.execute(select(func.count()).select_from(T_HANDLE_SIGNAL).where(
                T_HANDLE_SIGNAL.c.handle_id == handle_id)).scalar() or 0
            signal_id = str(int(count) + 1)
        self.conn.execute(delete(T_HANDLE_SIGNAL).where(
            T_HANDLE_SIGNAL.c.handle_id == handle_id, T_HANDLE_SIGNAL.c.signal_id == signal_id))
        self.conn.execute(insert(T_HANDLE_SIGNAL).values(
            handle_id=handle_id, signal_id=signal_id, stack_id=stack_id, status=status,
            reason=reason, data=data, created_at=self.now))
        return signal_id

    def stack_has_resource(self, stack_id: str, physical_id: str,
                           types: Iterable[str]) -> bool:
        """Whether stack ``stack_id`` has a resource of one of ``types`` whose physical id is
        ``physical_id``: a reference resolved within its stack, as Heat's resource_by_refid
        (a wait condition's handle is its own stack's, never another's)."""
        found = self.conn.execute(select(T_RES.c.id).where(
            T_RES.c.stack_id == stack_id, T_RES.c.physical_id == physical_id,
            T_RES.c.type.in_(list(types))).limit(1)).first()
        return found is not None

    def handle_signals(self, handle_id: str) -> list[dict[str, Any]]:
        """A handle's signals in the order received: ``{id, status, reason, data}``."""
        rows = self.conn.execute(select(T_HANDLE_SIGNAL).where(
            T_HANDLE_SIGNAL.c.handle_id == handle_id).order_by(T_HANDLE_SIGNAL.c.created_at))
        return [{"id": r.signal_id, "status": r.status, "reason": r.reason, "data": r.data}
                for r in rows]

    def forget_handle_signals(self, handle_id: str) -> int:
        return int(self.conn.execute(delete(T_HANDLE_SIGNAL).where(
            T_HANDLE_SIGNAL.c.handle_id == handle_id)).rowcount)

    # the engine's keys -------------------------------------------------------------------
    def service_key(self, name: str) -> str:
        """The engine's key called ``name``, made (random) the first time it is asked for;
        kept encrypted (``store/sealing.py``: one kept in clear before is encrypted now)."""
        found = self.conn.execute(select(T_KEY.c.value).where(T_KEY.c.name == name)).scalar()
        if found is not None:
            if not str(found).startswith(PREFIX):
                self.conn.execute(update(T_KEY).where(T_KEY.c.name == name, T_KEY.c.value == found)
                                  .values(value=self.sealer.seal(str(found))))
            return self.sealer.open(str(found))
        value = secrets.token_urlsafe(32)
        # Two processes may make it at once: the first one's stays, the other's insert is
        # dropped (and it reads the first one's).
        dialect.insert_or_ignore(self.conn, T_KEY, "name", {
            "name": name, "value": self.sealer.seal(value), "created_at": self.now})
        return self.sealer.open(str(self.conn.execute(
            select(T_KEY.c.value).where(T_KEY.c.name == name)).scalar()))
