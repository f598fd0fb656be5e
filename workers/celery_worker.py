"""The Celery app of ``convergence worker``, for Celery's own command line as well.

``celery -A workers.celery_worker worker`` runs the same worker as ``convergence worker`` (the
usual way, which also checks the schema first). Configured by the environment
(``CONVERGENCE_BROKER_URL``, ``CONVERGENCE_DATABASE_URL``, ...); no logic lives here.
"""

from __future__ import annotations

from convergence.dispatch.celery_dispatch import make_celery
from convergence.settings import load_settings

app = make_celery(load_settings())
