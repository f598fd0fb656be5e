"""The Heat-compatible REST API (orchestration v1) over the engine's use cases.

Callers: ``convergence.cli.api_cmd`` (``convergence api``, through ``convergence.api.serve``)
and tests build the app with :func:`convergence.api.app.create_app`. FastAPI, Starlette and
uvicorn are imported only in this package. The routes read the request
(``convergence.api.requests``), call the use cases of ``convergence.services`` (no route opens
a transaction itself) and shape Heat's answer (``convergence.api.views``); what runs beside
them while the app is up (the dispatcher's driver, the event notifier, the webhook deliverer)
the app owns (``convergence.api.app``).
"""
