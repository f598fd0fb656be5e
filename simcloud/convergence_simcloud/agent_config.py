"""How a simulated server asks for a software-configuration agent: the ``os-collect-config.json``
part of its user_data, as os-collect-config finds it on a real server.

Callers: ``convergence_simcloud.agent``'s scheduler calls :func:`agent_config` on a server's
``user_data`` (base64, as Nova got it) the first time it sees the server and whenever the
user_data changes. The user_data is a MIME multipart message (what Heat's ``OS::Nova::Server``
sends for ``SOFTWARE_CONFIG``); a part whose filename is ``os-collect-config.json`` holds
``{"os-collect-config": {"collectors": ["request"], "polling_interval": 1, "request":
{"metadata_url": "http://..."}}}``. A server without such a part, or whose part names no
``request`` collector or no metadata URL, has no agent: :func:`agent_config` answers None and
never raises on what a user put in user_data.
"""

from __future__ import annotations

import base64
import binascii
import email
import json
from dataclasses import dataclass
from typing import Any

PART_NAME = "os-collect-config.json"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """What the agent of one server does: poll ``metadata_url`` (pre-signed: no token) every
    ``polling_interval`` seconds (None: the agent's default, ``Options.agent_poll_interval``)."""

    metadata_url: str
    polling_interval: float | None = None


def agent_config(user_data: Any) -> AgentConfig | None:
    """The agent a server's ``user_data`` (base64 text) asks for; None when it asks for none."""
    if not isinstance(user_data, str) or not user_data:
        return None
    try:
        raw = base64.b64decode(user_data)
    except (binascii.Error, ValueError):
        return None
    if PART_NAME.encode() not in raw:
        return None  # the common case, without parsing MIME
    try:
        message = email.message_from_bytes(raw)
        for part in message.walk():
            if part.get_filename() != PART_NAME or part.is_multipart():
                continue
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                found = _from_document(json.loads(payload))
                if found is not None:
                    return found
    except (ValueError, TypeError, LookupError):
        return None  # not JSON, a broken MIME message, an unknown charset
    return None


def _from_document(document: Any) -> AgentConfig | None:
    """The agent an ``os-collect-config.json`` document describes (None: none)."""
    if not isinstance(document, dict):
        return None
    settings = document.get("os-collect-config")
    if not isinstance(settings, dict):
        return None
    collectors = settings.get("collectors")
    if isinstance(collectors, list) and "request" not in collectors:
        return None
    request = settings.get("request")
    url = request.get("metadata_url") if isinstance(request, dict) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    interval = settings.get("polling_interval")
    if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
        interval = None
    return AgentConfig(url, None if interval is None else float(interval))
