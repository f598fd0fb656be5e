"""The convergence engine: traversals, their plans and the steps that run their nodes.

``Engine`` (in ``engine.py``) is the facade the dispatchers, the sweeper and the services use;
its parts share an ``EngineContext`` (``context.py``): ``planning`` plans a traversal,
``batch`` runs a batch of nodes (``claim`` claims it, ``step`` runs each node's step with no
database access, deciding with the pure ``decide``; ``recording`` records the results and
``accounting`` counts them off), ``conclusion`` finishes, times out and resumes traversals.
``traversals`` starts and supersedes them (for the services), ``sweeper`` and ``orphans``
recover what crashes and lost messages leave behind, ``leases`` keeps a batch's leases alive.
The engine reaches the database and the plugins only through the ports
(``convergence.ports``) and the plugin port (``convergence.plugins.base``).
"""
