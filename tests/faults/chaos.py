"""Duplicated and reordered messages, made in the broker itself.

:class:`MessageChaos` works on the Celery queues of a Redis server (the fault tier's private
one): the messages that the workers will receive are really duplicated and really reordered,
the way a redelivery after a lost acknowledgement or a broker failover delivers them.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import uuid

import redis

QUEUES = ("convergence.steps", "convergence.plan")


class MessageChaos:
    """Shuffles the Celery queues and duplicates some of their messages, every ``period``.

    kombu's Redis transport keeps a queue as a list (producers LPUSH, consumers BRPOP). A
    round reads each list, and in one MULTI (WATCHed: a consumer's pop in between makes it
    start over) writes it back shuffled, with a ``duplicate`` fraction of the tasks it had not
    seen yet twice; a copy gets a fresh ``properties.delivery_tag``, since kombu keys
    unacknowledged messages by it.
    """

    def __init__(self, client: redis.Redis, seed: int = 0, period: float = 0.1,
                 duplicate: float = 0.3) -> None:
        self.client = client
        self.random = random.Random(seed)
        self.period = period
        self.duplicate = duplicate
        self.duplicated = 0
        self.shuffled = 0
        self._copied: set[str] = set()  # tasks seen: each is duplicated at most once
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="message-chaos", daemon=True)

    def __enter__(self) -> MessageChaos:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _copy(self, message: bytes) -> bytes | None:
        """A copy of ``message`` with a fresh delivery tag; None for a message (a task) that
        was copied before: one duplicate each, or the copies would multiply round by round."""
        envelope = json.loads(message)
        task = str((envelope.get("headers") or {}).get("id") or envelope.get("body"))
        if task in self._copied or self.random.random() >= self.duplicate:
            self._copied.add(task)
            return None
        self._copied.add(task)
        envelope.setdefault("properties", {})["delivery_tag"] = str(uuid.uuid4())
        return json.dumps(envelope).encode()

    def round(self) -> None:
        for queue in QUEUES:
            with self.client.pipeline() as pipe:
                try:
                    pipe.watch(queue)  # type: ignore[no-untyped-call]
                    messages: list[bytes] = pipe.lrange(queue, 0, -1)  # type: ignore[assignment]
                    if not messages:
                        continue
                    out = list(messages)
                    copies = [c for c in map(self._copy, messages) if c is not None]
                    out += copies
                    self.random.shuffle(out)
                    pipe.multi()
                    pipe.delete(queue)
                    pipe.rpush(queue, *out)
                    pipe.execute()
                    self.duplicated += len(copies)
                    self.shuffled += 1
                except redis.WatchError:
                    continue

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with contextlib.suppress(redis.RedisError, ValueError):
                self.round()
