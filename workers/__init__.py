"""Worker entry points for Celery's own command line: the processes that run the engine's steps.

``celery_worker`` exposes the app of ``convergence worker`` under a module path Celery can
load (``celery -A workers.celery_worker worker``), for deployments that run Celery's command
rather than ``convergence worker``. No logic lives here: the worker's life is
``convergence.workers``.
"""
