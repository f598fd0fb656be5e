"""The trusts of stacks that are gone: deleted once the stack is deleted or abandoned, and by
the sweeper when that did not happen (the process died right after the stack's end, or
Keystone could not answer then), so none is left behind.

Callers: the conclusion of a stack's delete (``convergence.engine.conclusion``), the use case
that abandons a stack (``convergence.services.stacks``) and the sweeper
(``convergence.engine.sweeper``). The cloud backend deletes the trust
(``PluginRegistry.release``); a stack forgets its trust only once that is done.
"""

from __future__ import annotations

import logging

from convergence.engine.context import EngineContext, scope_of
from convergence.ports.views import StackView

log = logging.getLogger(__name__)


def release_trust(ctx: EngineContext, stack: StackView) -> bool:
    """Delete the trust of a stack that is gone and forget it; False when that must wait
    (the sweeper tries again)."""
    if stack.trust_id is None or stack.parent_id is not None:
        return True  # a nested stack uses its top-level stack's trust: that one's end ends it
    try:
        ctx.registry.release(scope_of(stack))
    except Exception as exc:
        log.info("the trust of stack %s is not deleted yet: %s", stack.id, exc)
        return False
    with ctx.store.begin() as tx:
        tx.update_stack(stack.id, trust_id=None)
    return True


def release_spent_trusts(ctx: EngineContext, limit: int) -> int:
    """Delete the trusts deleted stacks still name, up to ``limit``; how many were."""
    with ctx.store.begin() as tx:
        spent = tx.spent_trusts(limit)
    return sum(release_trust(ctx, stack) for stack in spent)
