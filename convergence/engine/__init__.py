"""The convergence engine: traversals, their plans and the steps that run their nodes.

``Engine`` (in ``engine.py``) is the facade the dispatchers and services use; ``decide`` is the
pure core of a step; ``step`` sequences a batch of steps' effects; ``traversal`` starts, plans
and finishes traversals.
"""
