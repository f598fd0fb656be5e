"""The ledger's scenarios (``tests/engine/test_ledger.py``) on real worker processes.

Imported, not copied: on PostgreSQL, Redis and two ``convergence worker`` processes with a
real clock, the held actions really last their few seconds and the second request lands
while the first one's operation is under way.
"""

from tests.engine.test_ledger import (  # noqa: F401
    test_a_failed_create_tried_again,
    test_a_resource_put_back_while_its_delete_runs,
)
