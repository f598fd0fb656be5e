"""Python's cycle collector, paused while a template is read, parsed and validated.

Reading a large template allocates millions of containers that all live on (the document, the
parsed template, the definition); none of them forms a cycle, yet the collector would walk
them again and again as they accumulate, a third of the time of a 100,000-resource template.
:func:`collector_paused` turns it off for the duration and back on when the last user is done
(threads and nested uses share one count); memory is still freed by reference counting.

Turned back on, the collector would at once walk everything made meanwhile as its youngest
generation, and walk it again as it ages: 3 s of the 19 s a 300,000-resource template took.
What the pause made is moved straight to the oldest generation instead (``gc.freeze`` then
``gc.unfreeze``, which moves no object's memory), where only the rare full collections look.

Callers: ``convergence.template.source.load_document``, ``convergence.template.parse`` (its
``parse_collecting``) and ``convergence.template.validate`` (its ``validate_stack``).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_users = 0
_resume = False  # whether the collector was on when the first user paused it


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cycle collector off (as it was before, after the last user)."""
    global _users, _resume
    with _lock:
        if _users == 0:
            _resume = gc.isenabled()
            gc.disable()
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _resume:
                gc.freeze()  # every tracked object to the permanent generation,
                gc.unfreeze()  # and from there to the oldest one
                gc.enable()
