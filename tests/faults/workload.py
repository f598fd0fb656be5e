"""The workload the faults land on: stacks of ``OS::Heat::TestResource`` created, updated (some
updates on top of running ones) and deleted over the Heat API, each request's outcome kept.

Callers: the fault tests and ``benchmarks/soak.py``; :mod:`tests.faults.invariants` checks the
end state against what :class:`Tracked` says the last accepted request asked for.

Shapes (every resource's ``value`` is a literal, so the expected value of each entity is read
off the template; dependencies go through ``client_name``, a property the plugin ignores):

- ``wide``: independent resources (30 in the tests);
- ``layered``: layers whose resources read the previous layer's ``output`` (``get_attr``);
- ``replacing``: ``update_replace: true``, so a changed value is a replacement
  (create-before-delete);

An update changes the value of about half the resources (wide stacks also lose and gain a
few). Actions take ``wait`` seconds (polled by the engine), so faults land mid-traversal.

A request the API did not answer (a transport error, a 5xx while PostgreSQL restarts) has an
unknown outcome: it is settled by reading the stack's generation back (one driver thread per
stack at a time, so the generation tells whether it was accepted).
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

TENANT = "faults"
VERSION = "2018-08-31"
SHAPES = ("wide", "layered", "replacing")
SETTLE_TIMEOUT = 120.0


@dataclass(frozen=True)
class Res:
    """One resource of a spec: its value, its wait, and what it reads."""

    value: str
    wait: float
    replace: bool = False
    reads: str | None = None  # a resource whose output this one reads


Spec = dict[str, Res]


def template(spec: Spec, fail: str | None = None) -> dict[str, Any]:
    """The HOT template of ``spec``; resource ``fail`` (if any) is told to fail."""
    resources: dict[str, Any] = {}
    for name, r in spec.items():
        props: dict[str, Any] = {"value": r.value, "wait_secs": r.wait}
        if r.replace:
            props["update_replace"] = True
        if r.reads is not None:
            props["client_name"] = {"get_attr": [r.reads, "output"]}
        if name == fail:
            props["fail"] = True
        resources[name] = {"type": "OS::Heat::TestResource", "properties": props}
    return {"heat_template_version": VERSION, "resources": resources}


def make_spec(shape: str, rng: random.Random, size: int, wait: tuple[float, float]) -> Spec:
    def w() -> float:
        return round(rng.uniform(*wait), 2)

    tag = uuid.uuid4().hex[:4]
    if shape == "wide":
        return {f"r{i}": Res(f"r{i}-{tag}", w()) for i in range(size)}
    if shape == "layered":
        width = max(1, size // 4)
        spec: Spec = {}
        for layer in range(4):
            for j in range(width):
                reads = f"l{layer - 1}_{j}" if layer else None
                spec[f"l{layer}_{j}"] = Res(f"l{layer}_{j}-{tag}", w(), reads=reads)
        return spec
    if shape == "replacing":
        return {f"p{i}": Res(f"p{i}-{tag}", w(), replace=True) for i in range(size)}
    raise ValueError(shape)


def mutate(shape: str, spec: Spec, rng: random.Random, wait: tuple[float, float]) -> Spec:
    """The next version: about half the values changed; a wide stack loses and gains a few."""
    tag = uuid.uuid4().hex[:4]
    out = {name: (Res(f"{name}-{tag}", r.wait, r.replace, r.reads) if rng.random() < 0.5
                  else r) for name, r in spec.items()}
    if shape == "wide":
        for name in rng.sample(sorted(out), k=min(len(out) - 1, rng.randint(0, 3))):
            del out[name]
        for _ in range(rng.randint(0, 3)):
            name = f"n{uuid.uuid4().hex[:5]}"
            out[name] = Res(f"{name}-{tag}", round(rng.uniform(*wait), 2))
    return out


@dataclass
class Request:
    kind: str  # create | update | delete
    status: int  # HTTP status; 0: no answer
    generation: int | None  # the generation it was given, when accepted
    accepted: bool
    at: float = field(default_factory=time.time)


@dataclass
class Tracked:
    """A stack of the workload and what its last accepted request asked for."""

    name: str
    shape: str
    spec: Spec  # what the last accepted create/update asked for
    id: str | None = None
    deleted: bool = False  # the last accepted request is a delete
    failing: str | None = None  # the last accepted request told this resource to fail
    generation: int = 0
    requests: list[Request] = field(default_factory=list)


class Workload:
    """Sends requests for stacks over HTTP; one instance per driving thread."""

    def __init__(self, api_url: str, seed: int = 0, wait: tuple[float, float] = (1.0, 3.0),
                 tenant: str = TENANT, timeout: float = 60.0) -> None:
        self.base = f"{api_url}/v1/{tenant}"
        self.rng = random.Random(seed)
        self.wait = wait
        self.http = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _url(self, t: Tracked) -> str:
        return f"{self.base}/stacks/{t.name}/{t.id}"

    def _send(self, method: str, url: str, body: dict[str, Any] | None) -> httpx.Response | None:
        try:
            return self.http.request(method, url, json=body)
        except httpx.HTTPError:
            return None

    def _generation(self, t: Tracked) -> int | None:
        """The stack's generation read back (retried while the API cannot answer)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            reply = self._send("GET", f"{self.base}/stacks/{t.name}", None)
            if reply is not None and reply.status_code in (200, 302):
                if reply.status_code == 302:
                    reply = self._send("GET", reply.headers["location"], None)
                if reply is not None and reply.status_code == 200:
                    stack = reply.json()["stack"]
                    t.id = t.id or stack["id"]
                    return int(stack["generation"])
            if reply is not None and reply.status_code == 404:
                return None
            time.sleep(0.5)
        raise RuntimeError(f"stack {t.name}: generation unreadable for {SETTLE_TIMEOUT}s")

    def create(self, shape: str, size: int = 30, name: str | None = None) -> Tracked:
        spec = make_spec(shape, self.rng, size, self.wait)
        t = Tracked(name or f"{shape}-{uuid.uuid4().hex[:6]}", shape, spec)
        reply = self._send("POST", f"{self.base}/stacks",
                           {"stack_name": t.name, "template": template(spec)})
        if reply is not None and reply.status_code == 201:
            t.id = reply.json()["stack"]["id"]
            t.generation = 1
        elif reply is None or reply.status_code >= 500:
            generation = self._generation(t)  # settles whether it was accepted
            t.generation = generation or 0
        accepted = t.id is not None
        t.requests.append(Request("create", reply.status_code if reply else 0,
                                  t.generation if accepted else None, accepted))
        if not accepted:
            t.deleted = True  # never existed: expected to be absent
        return t

    def update(self, t: Tracked, fail: bool = False, patch: bool = False) -> Request:
        """PUT (or PATCH) a mutated spec; ``fail``: one resource of it is told to fail."""
        spec = mutate(t.shape, t.spec, self.rng, self.wait)
        failing = self.rng.choice(sorted(spec)) if fail else None
        body: dict[str, Any] = {"template": template(spec, failing)}
        before = t.generation
        reply = self._send("PATCH" if patch else "PUT", self._url(t), body)
        generation: int | None = None
        if reply is not None and reply.status_code == 202:
            generation = int(reply.json()["stack"]["generation"])
        elif reply is None or reply.status_code >= 500:
            now = self._generation(t)
            generation = now if now is not None and now > before else None
        request = Request("update", reply.status_code if reply else 0, generation,
                          generation is not None)
        t.requests.append(request)
        if generation is not None:
            t.spec, t.failing, t.generation = spec, failing, generation
        return request

    def delete(self, t: Tracked) -> Request:
        before = t.generation
        reply = self._send("DELETE", self._url(t), None)
        accepted = reply is not None and reply.status_code == 204
        if reply is None or reply.status_code >= 500:
            now = self._generation(t)
            accepted = now is None or now > before
        request = Request("delete", reply.status_code if reply else 0, None, accepted)
        t.requests.append(request)
        if accepted:
            t.deleted = True
        return request
