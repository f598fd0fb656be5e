"""Dispatchers: how work items reach ``Engine.execute``. In-process (threads) or Celery."""
