"""Software deployments and wait conditions (``tests/engine/test_software.py``) on real worker
processes: PostgreSQL, Redis and two ``convergence worker`` processes, where an agent's report
wakes a parked deployment through the broker, and two clients signal one handle at once
against PostgreSQL's row locks.

The scenarios are imported, not copied; the one that moves the engine's clock by hand (a wait
condition's timeout) stays on the embedded tier.
"""

from tests.engine.test_software import (  # noqa: F401
    test_a_changed_input_reruns_exactly_the_deployments_that_depend_on_it,
    test_a_failure_signal_fails_the_wait_condition,
    test_a_late_report_on_a_replaced_run_changes_nothing,
    test_a_non_zero_status_code_fails_the_deployment_with_its_stderr,
    test_a_wait_condition_waits_for_count_signals_holding_nothing,
    test_deleting_deployments_forgets_them_and_their_configs,
    test_deployments_park_until_reported_and_chain_outputs_to_inputs,
    test_no_signal_deployments_complete_without_waiting,
    test_structured_deployments_put_their_inputs_in_the_config,
    test_two_clients_signalling_at_once_lose_no_signal,
    test_update_wait_condition_handles_are_renewed_by_every_update,
)
