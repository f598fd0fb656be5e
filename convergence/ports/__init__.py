"""Ports: the protocols and value types the core owns, implemented by the adapters
(``convergence.store``, ``convergence.dispatch``) and used by the engine, the services and
the plugins."""
