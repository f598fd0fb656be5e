"""Worker entry points and their configuration: the processes that run the engine's steps.

No logic lives here; the engine's code is in ``convergence``.
"""
