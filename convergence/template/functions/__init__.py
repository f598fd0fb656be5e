"""Intrinsic functions, grouped by family; ``versions`` arranges them into per-version tables.

``base`` defines what a function is (:class:`~convergence.template.functions.base.FunctionDef`,
``Call``) and the two protocols a function talks to: ``CheckContext``, implemented by ``parse``,
and ``Resolver``, implemented by ``resolve``. The family modules (``references``, ``strings``,
``replace``, ``collections``, ``repeat``, ``conditions``, ``yaql_expr``) import only ``base``
(and ``replace`` the shared helpers of ``strings``); nothing here imports ``versions`` or the
modules that use the functions, so the package sits below them in the import graph.
"""
