"""Resource plugins: one class per resource type, found through the ``convergence.resources``
entry-point group (see ``registry``). Built-in Heat types live in ``heat/``."""
