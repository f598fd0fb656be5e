"""What the use cases need of a runtime: the :class:`Runtime` protocol they are written against.

The use cases sit below the composition root: they never import ``convergence.runtime`` (the
layers contract forbids it). They take any object with these attributes; the one the entry
points build is ``convergence.runtime.Runtime`` (the store, the plugins, the engine and a
dispatcher, wired by ``open_runtime``), and mypy checks it fits wherever an entry point hands
one to a use case. Callers: every module of ``convergence.services`` names it in signatures;
the backends the plugins reach the engine through are :class:`Attached` to one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from convergence.engine.engine import Engine
    from convergence.plugins.registry import PluginRegistry
    from convergence.ports.clock import Clock
    from convergence.ports.dispatch import Dispatcher, LocalDispatcher
    from convergence.ports.store import Store
    from convergence.services.holds import StackHolds
    from convergence.settings import Settings


class Runtime(Protocol):
    """The store, the plugins, the engine and the dispatcher a use case runs with."""

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def store(self) -> Store: ...

    @property
    def registry(self) -> PluginRegistry: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def holds(self) -> StackHolds: ...

    @property
    def inprocess(self) -> LocalDispatcher | None:
        """The dispatcher when this process runs the work itself (embedded), else None."""
        ...


class Attached:
    """A backend the runtime hands the plugins before the runtime exists (the engine's own
    stacks, its software configuration), attached to it once it does (``open_runtime``)."""

    def __init__(self) -> None:
        self._runtime: Runtime | None = None

    def attach(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def unattached(self) -> Exception:
        """What using it before it is attached raises."""
        return RuntimeError(f"{type(self).__name__} is not attached to a runtime")

    @property
    def rt(self) -> Runtime:
        if self._runtime is None:
            raise self.unattached()
        return self._runtime
