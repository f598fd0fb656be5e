"""Convergence: an orchestration engine for OpenStack Heat (HOT) templates.

The pure core (``template``, ``graph``) imports no database, queue or cloud library; effects
live at the edges (``store``, ``dispatch``, ``plugins``, ``api``, ``cli``).
"""

__version__ = "0.1.0"
