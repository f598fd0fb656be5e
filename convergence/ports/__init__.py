"""Ports: the protocols and value types the core owns, implemented by the adapters.

``store`` (the ``Store`` and ``Tx`` protocols, one per aggregate), ``views`` and ``pages`` (the
plain values that cross them), ``dispatch`` and ``work`` (the dispatcher and what it carries),
``clock`` (time as a seam) and ``entity_tables`` (storage for plugin backends). Implemented by
``convergence.store`` and ``convergence.dispatch``; used by the engine, the services, the
plugins, the API and the CLI. Nothing here imports anything of ``convergence`` but the ports.
"""
