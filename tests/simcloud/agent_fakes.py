"""What the agent's tests stand in for the orchestration engine: a real HTTP server on a thread
that answers pre-signed metadata URLs with deployments and records the signals it receives,
and the helpers that build a server's user_data and a deployment as the engine would.

Callers: ``tests/simcloud/test_agent.py`` and ``test_agent_life.py``. :class:`Orchestration`
serves ``GET /v1/signed/<token>`` (the deployments set for that token, counting the polls; a
status can be forced per token) and ``POST``/``PUT /signal/<name>`` (recorded; the answers
can be scripted per name, such as 500 twice before a 200).
"""

from __future__ import annotations

import base64
import collections
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Signal:
    """One signal received."""

    name: str
    verb: str
    body: dict[str, Any]
    content_type: str


class Orchestration:
    """The fake orchestration endpoint's state (read and set under :attr:`lock`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.url = ""
        self.deployments: dict[str, list[dict[str, Any]]] = {}  # token -> deployments
        self.metadata_status: dict[str, int] = {}  # token -> the status its polls get
        self.polls: collections.Counter[str] = collections.Counter()
        self.signals: list[Signal] = []
        self.answers: dict[str, list[int]] = {}  # signal name -> statuses to answer, in turn

    def metadata_url(self, token: str) -> str:
        return f"{self.url}/v1/signed/{token}"

    def signal_url(self, name: str) -> str:
        return f"{self.url}/signal/{name}"

    def set(self, token: str, deployments: list[dict[str, Any]]) -> None:
        with self.lock:
            self.deployments[token] = deployments

    def polled(self, token: str) -> int:
        with self.lock:
            return self.polls[token]

    def signals_of(self, name: str) -> list[Signal]:
        with self.lock:
            return [s for s in self.signals if s.name == name]


def _handler(fake: Orchestration) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the agent's client pools connections

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            token = self.path.removeprefix("/v1/signed/")
            with fake.lock:
                fake.polls[token] += 1
                found = fake.deployments.get(token)
                status = fake.metadata_status.get(token, 200)
            if found is None:
                self._answer(404, {"error": "no such deployment metadata"})
            else:
                self._answer(status, {"deployments": found} if status == 200 else {})

        def _signal(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            name = self.path.removeprefix("/signal/")
            with fake.lock:
                fake.signals.append(Signal(name, self.command, json.loads(raw),
                                           self.headers.get("Content-Type", "")))
                scripted = fake.answers.get(name)
                status = scripted.pop(0) if scripted else 200
            self._answer(status, {})

        do_POST = do_PUT = _signal

    return Handler


@contextmanager
def orchestration() -> Iterator[Orchestration]:
    """Serve a fake orchestration endpoint on a free loopback port."""
    fake = Orchestration()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="fake-orchestration", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def user_data(metadata_url: str | None, polling_interval: float | None = None,
              collectors: list[str] | None = None, charset: str = "us-ascii") -> str:
    """A server's user_data as the engine builds it: base64 of a MIME multipart message with
    a cloud-config part and (with a URL) the ``os-collect-config.json`` part."""
    message = MIMEMultipart()
    message.attach(MIMEText("#cloud-config\nruncmd: []\n", "cloud-config"))
    if metadata_url is not None:
        settings: dict[str, Any] = {"collectors": collectors or ["request"],
                                    "request": {"metadata_url": metadata_url}}
        if polling_interval is not None:
            settings["polling_interval"] = polling_interval
        part = MIMEText(json.dumps({"os-collect-config": settings}), "x-cfninitdata", charset)
        part.add_header("Content-Disposition", "attachment",
                        filename="os-collect-config.json")
        message.attach(part)
    return base64.b64encode(message.as_bytes()).decode()


def deployment(deployment_id: str, name: str, config: Any = "", group: str = "script", *,
               inputs: dict[str, Any] | None = None, outputs: tuple[str, ...] = (),
               signal: str | None = None, verb: str | None = None,
               transport: str = "TEMP_URL_SIGNAL", action: str = "CREATE") -> dict[str, Any]:
    """A derived config as the metadata lists it (``signal``: the deploy_signal_id URL)."""
    entries = [{"name": k, "value": v, "type": "String"} for k, v in (inputs or {}).items()]
    entries += [{"name": "deploy_server_id", "value": "", "type": "String"},
                {"name": "deploy_action", "value": action, "type": "String"},
                {"name": "deploy_signal_transport", "value": transport, "type": "String"}]
    if signal is not None:
        entries.append({"name": "deploy_signal_id", "value": signal, "type": "String"})
    if verb is not None:
        entries.append({"name": "deploy_signal_verb", "value": verb, "type": "String"})
    return {"id": deployment_id, "name": name, "group": group, "config": config,
            "inputs": entries,
            "outputs": [{"name": o, "type": "String", "error_output": False} for o in outputs],
            "options": {}, "creation_time": "2024-01-01T00:00:00Z", "updated_time": None}
