"""The engine's scenarios (``tests/engine/test_scenarios.py``) on real worker processes.

The scenarios are imported, not copied: this tier's ``rt`` and ``story`` fixtures
(``conftest.py``) put them on PostgreSQL, Redis and two ``convergence worker`` processes with
a real clock.
"""

from tests.engine.test_scenarios import *  # noqa: F403
