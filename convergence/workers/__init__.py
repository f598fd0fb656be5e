"""The worker process's life: a Celery worker node's runtime, hooks, pool and graceful stop.

``app`` builds the app a worker runs (``convergence worker``, ``workers/celery_worker.py``);
``process`` is the node's life as one object (runtime per process, sweeping, letting go of
leases); ``pool`` and ``procfs`` watch a prefork node's pool processes; ``heartbeat`` is the
beat of every process that runs steps (the API's too, in embedded mode) and ``stats`` the
figures a worker writes for the benchmarks. Sending work is ``convergence.dispatch``'s.

Importing this package imports nothing else: the API takes ``heartbeat`` without Celery.
"""
