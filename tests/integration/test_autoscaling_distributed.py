"""Scaling policies' signals (``tests/engine/test_autoscaling.py``) on real worker processes:
PostgreSQL, Redis and two ``convergence worker`` processes; two clients signalling at once
against PostgreSQL's row locks."""

from tests.engine.test_autoscaling import (  # noqa: F401
    test_a_storm_of_signals_ends_at_their_sum_and_loses_none,
    test_signals_scale_the_group_as_new_generations,
    test_two_clients_signalling_at_once_lose_no_signal,
)
