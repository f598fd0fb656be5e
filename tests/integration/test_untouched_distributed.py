"""An update costs what it changes (``tests/engine/test_untouched.py``) on real worker
processes: PostgreSQL, Redis and two ``convergence worker`` processes."""

from tests.engine.test_untouched import *  # noqa: F403
