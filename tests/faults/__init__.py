"""The crash-fault tier: faults injected into running traversals, invariants checked after.

``services`` (private PostgreSQL and Redis), ``cluster`` (workers, API processes, the faults),
``workload`` (stacks over the API) and ``invariants`` (what must hold) are shared with
``benchmarks/soak.py``; the ``test_*`` modules are the CI runs.
"""
