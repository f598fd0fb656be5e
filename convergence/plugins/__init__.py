"""Resource plugins: one class per resource type, an adapter behind the plugin port.

``base`` is the port itself (what a plugin is, the ``PluginContext`` the engine calls it with,
the ``PluginHost`` its backends are built from); ``registry`` finds the plugin classes through
the ``convergence.resources`` entry-point group and builds their backends; ``type_schemas``
answers the resource-type listings; ``heat/`` holds Heat's own types. Callers: the runtime
(``convergence.runtime`` builds and binds the registry), the engine (steps call plugins), the
services and validation (the registry as type catalog), the API and the CLI (type listings).
"""
