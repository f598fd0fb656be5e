"""Convergence: an orchestration engine for OpenStack Heat (HOT) templates.

Its layers, high to low (``ARCHITECTURE.md``): the edges ``cli`` and ``api``, the worker process
(``workers``), the composition root (``runtime``), the use cases (``services``), the ``engine``
and the ``ports`` it owns, implemented by the adapters ``store``, ``dispatch`` and ``plugins``.
The pure core (``template``, ``graph``) imports no database, queue or cloud library. This file
imports nothing, so that ``convergence --help`` pays only for what the command needs.
"""

__version__ = "0.1.0"
