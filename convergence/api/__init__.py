"""The Heat-compatible REST API (orchestration v1) over the engine's use cases.

Callers: ``convergence.cli.api_cmd`` (``convergence api``) and tests build the app with
:func:`convergence.api.app.create_app`. FastAPI, Starlette and uvicorn are imported only in
this package; the routes call ``convergence.services`` and nothing below it (apart from
reading a stored template).
"""
