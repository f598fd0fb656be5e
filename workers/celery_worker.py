"""The Celery app of ``convergence worker``, for Celery's own command line as well.

``celery -A workers.celery_worker worker`` runs the same worker as ``convergence worker`` (the
usual way, which also checks the schema first). Configured by the environment
(``CONVERGENCE_BROKER_URL``, ``CONVERGENCE_DATABASE_URL``, ...), read once here into the
settings :func:`convergence.workers.app.make_worker_app` builds the app from; no logic lives
here.
"""

from __future__ import annotations

from convergence.settings import load_settings
from convergence.workers.app import make_worker_app

app = make_worker_app(load_settings())
