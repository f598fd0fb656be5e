"""A thousand resources, wide and layered (``tests/engine/test_scale.py``), on real worker
processes: PostgreSQL, Redis and two ``convergence worker`` processes of two threads each,
batches of both workers finishing nodes whose successors they share (the layered fan-in), and
an update whose cleanups of the records kept in place are done without a step."""

from tests.engine.test_scale import test_a_thousand_resources  # noqa: F401
