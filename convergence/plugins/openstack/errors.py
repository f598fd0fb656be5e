"""openstacksdk's exceptions translated, once, into what the engine's plugin port means.

Callers: every OpenStack resource type wraps its cloud calls in :func:`translated`; the cloud
backend (``convergence.plugins.openstack.clouds``) wraps connecting. What a call raised
becomes one of three things:

- absent (:class:`Absent`): the cloud answered 404, the object is not there; a type decides
  what that means (a delete is done, a poll found its object vanished);
- retry later (``RetryLater`` with a delay): a 5xx, a 429 (after the ``Retry-After`` the cloud
  asked for), a 409 (the object is busy: Nova's task state, Neutron's ``InUse``), a connection
  failure or a timeout, an expired token;
- failed for good (``ResourceFailure`` with the cloud's message): every other 4xx (a bad
  request, a quota exceeded, a forbidden call).

Anything else raised inside is not translated: the engine counts it as its own fault.
"""

from __future__ import annotations

import contextlib
import email.utils
import time
from collections.abc import Iterator

from keystoneauth1 import exceptions as ks_exceptions
from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import ResourceFailure, RetryLater

DEFAULT_DELAY = 2.0  # seconds before a call the cloud refused for now is made again
MAX_DELAY = 300.0  # a Retry-After longer than this is honoured as this


class Absent(Exception):
    """The cloud answered 404: the object is not there."""


def retry_after(headers: object, default: float = DEFAULT_DELAY) -> float:
    """The delay a ``Retry-After`` header asks for (seconds or an HTTP date), bounded."""
    value = getattr(headers, "get", lambda _: None)("Retry-After")
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(str(value))
        except (TypeError, ValueError):
            return default
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_DELAY)


def _message(exc: sdk_exceptions.HttpException) -> str:
    details = getattr(exc, "details", None)
    return str(details or exc.message or exc)


def translate(exc: BaseException, doing: str) -> BaseException | None:
    """What ``exc``, raised while ``doing`` something, means to the engine; None: not a cloud
    error (left to the engine as its own fault)."""
    if isinstance(exc, sdk_exceptions.NotFoundException | sdk_exceptions.ResourceNotFound):
        return Absent(f"{doing}: {exc}")
    if isinstance(exc, sdk_exceptions.HttpException):
        status = exc.status_code or 0
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", {}) if response is not None else {}
        if status == 429:
            return RetryLater(f"{doing}: rate limited by the cloud", retry_after(headers))
        if status >= 500 or status in (0, 401, 409):
            # 409: busy (a task under way, an object in use); 401: a token that expired
            # between two calls, which the next call's new token cures.
            return RetryLater(f"{doing}: {status or 'no answer'}: {_message(exc)}",
                              retry_after(headers))
        return ResourceFailure(f"{doing}: {_message(exc)}")
    if isinstance(exc, ks_exceptions.ConnectionError | ks_exceptions.ConnectFailure |
                  ks_exceptions.RequestTimeout | ks_exceptions.DiscoveryFailure |
                  ks_exceptions.ServiceUnavailable | ks_exceptions.Unauthorized |
                  ks_exceptions.RetriableConnectionFailure):
        return RetryLater(f"{doing}: the cloud did not answer: {exc}", DEFAULT_DELAY)
    if isinstance(exc, ks_exceptions.HttpError):
        status = getattr(exc, "http_status", 0) or 0
        if status == 429 or status >= 500:
            return RetryLater(f"{doing}: {exc}", DEFAULT_DELAY)
        return ResourceFailure(f"{doing}: {exc}")
    if isinstance(exc, ks_exceptions.ClientException | sdk_exceptions.SDKException):
        # The SDK's own troubles reaching the cloud (an endpoint not found in the catalog
        # while the cloud restarts, a discovery that failed): worth another try.
        return RetryLater(f"{doing}: {exc}", DEFAULT_DELAY)
    return None


@contextlib.contextmanager
def translated(doing: str) -> Iterator[None]:
    """Run a block of cloud calls; what they raise comes out as the engine understands it."""
    try:
        yield
    except (Absent, RetryLater, ResourceFailure):
        raise
    except Exception as exc:
        meant = translate(exc, doing)
        if meant is None:
            raise
        raise meant from exc
