"""Dispatchers: the adapters of the dispatch port, how work items reach ``Engine.execute``.

They implement ``convergence.ports.dispatch``: in-process (threads, ``inprocess``) or Celery
(``celery_dispatch``, which sends work and drives a message's work; the worker process's life
is ``convergence.workers``). Built by ``convergence.runtime``; nothing here imports the runtime.
"""
