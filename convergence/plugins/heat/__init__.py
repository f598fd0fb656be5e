"""Heat's own resource types (``OS::Heat::*``), with Heat's property and attribute schemas.

Registered in ``pyproject.toml``'s ``convergence.resources`` entry points, so that the registry
(``convergence.plugins.registry``) finds them like any installed type; outside ``heat/`` only
the tests import them by name. ``test_resource`` brings its backends: ``test_backend`` (a table,
in deployments) and ``test_entities`` (its in-memory twin, for unit tests).
"""
