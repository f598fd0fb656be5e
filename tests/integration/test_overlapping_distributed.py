"""Overlapping requests (``tests/engine/test_overlapping.py``) on real worker processes.

Imported, not copied: this tier's ``rt`` and ``story`` fixtures put them on PostgreSQL, Redis
and two ``convergence worker`` processes with a real clock, where the held actions really last
their few seconds and the requests land while other workers are mid-step.
"""

from tests.engine.test_overlapping import *  # noqa: F403
