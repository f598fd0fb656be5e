"""The HTTP client that delivers webhooks: it connects only to addresses it has checked.

Callers: ``convergence.services.webhooks`` builds one with :func:`client` (the API's
deliverer, once; a worker's delivery task, once a task) and files each failure under
:func:`failure_class`; tests build one with a resolver of their own (``resolve``) or a
certificate authority of their own (``verify``).

The check is made where the connection is made, not before the request: httpx hands the
connection pool (httpcore's) a :class:`GuardedBackend` as its network backend, which resolves
the URL's host itself, checks every address against the :class:`Destinations` policy, and
opens the TCP connection to an address it checked (numeric: nothing resolves again). A name
that resolves, or rebinds between a check and the connection, to an inside address is refused
(:class:`DestinationNotAllowed`) before a packet leaves for it. TLS still names the URL's host
(httpcore gives ``start_tls`` the origin's host: SNI and certificate checks), and so does the
``Host`` header.

Besides: redirects are not followed (an answer of 3xx is a failed attempt), environment
proxies are ignored (a proxy would make the connection on our behalf, unchecked), only http
and https are sent, and an answer's body is never read.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import httpcore
import httpx

from convergence.services.webhook_destinations import Address, Destinations, literal

# What a failed attempt stored on a delivery says: a class, never the connection's own text
# (an address, a port, an errno string would tell a tenant what is behind them).
DESTINATION_NOT_ALLOWED = "destination not allowed"
TIMED_OUT = "timed out"
CONNECTION_FAILED = "connection failed"

TIMEOUT_SECONDS = 10.0
SCHEMES = ("http", "https")
MAX_ADDRESSES = 4  # a host's addresses tried in turn, each with the whole connect timeout

# The resolver: a host and port to the addresses to try, in order (tests give their own).
Resolver = Callable[[str, int], Sequence[str]]


class DestinationNotAllowed(httpx.ConnectError):
    """Every address of the destination is one webhooks may not reach."""


def resolve(host: str, port: int) -> list[str]:
    """The system resolver's addresses for ``host`` (TCP), in its order, each once."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
    seen: dict[str, None] = {}
    for _family, _type, _proto, _name, sockaddr in found:
        seen.setdefault(str(sockaddr[0]), None)
    return list(seen)


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's synchronous network backend, connecting only to checked addresses."""

    def __init__(self, destinations: Destinations, resolver: Resolver = resolve) -> None:
        self._destinations = destinations
        self._resolve = resolver
        self._inner = httpcore.SyncBackend()

    def addresses(self, host: str, port: int) -> list[Address]:
        """The addresses of ``host`` a connection may go to; DestinationNotAllowed when none.

        An IP literal is not resolved; a name is, and its refused addresses are dropped (an
        answer that mixes an inside address with a global one reaches the global one only)."""
        found = literal(host)
        candidates = [found] if found is not None else \
            [a for a in (literal(x) for x in self._resolve(host, port)) if a is not None]
        allowed = [a for a in candidates if self._destinations.refusal(a) is None]
        if not allowed:
            raise DestinationNotAllowed(f"{host!r}: no address webhooks may reach")
        return allowed[:MAX_ADDRESSES]

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                    ) -> httpcore.NetworkStream:
        failed: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in self.addresses(host, port):
            try:
                return self._inner.connect_tcp(str(address), port, timeout, local_address,
                                               socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failed = exc
        assert failed is not None  # addresses() returns one address at least
        raise failed

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                            ) -> httpcore.NetworkStream:
        raise DestinationNotAllowed("unix sockets are not webhook destinations")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@contextmanager
def _as_httpx(request: httpx.Request | None = None) -> Iterator[None]:
    """httpcore's exceptions as httpx's (what callers of an httpx client catch)."""
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise httpx.TimeoutException(str(exc), request=request) from exc
    except httpcore.ConnectError as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError,
            httpcore.UnsupportedProtocol) as exc:
        raise httpx.TransportError(str(exc), request=request) from exc


class _Body(httpx.SyncByteStream):
    def __init__(self, answer: httpcore.Response) -> None:
        self._answer = answer

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx():
            yield from self._answer.iter_stream()

    def close(self) -> None:
        with _as_httpx():
            self._answer.close()


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport over a connection pool whose network backend is guarded."""

    def __init__(self, destinations: Destinations, resolver: Resolver = resolve,
                 verify: ssl.SSLContext | bool = True) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=10, max_keepalive_connections=5, keepalive_expiry=5.0,
            network_backend=GuardedBackend(destinations, resolver))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme not in SCHEMES:
            raise DestinationNotAllowed(f"scheme {request.url.scheme!r}", request=request)
        assert isinstance(request.stream, httpx.SyncByteStream)
        url = httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host,
                           port=request.url.port, target=request.url.raw_path)
        core = httpcore.Request(method=request.method, url=url, headers=request.headers.raw,
                                content=request.stream, extensions=request.extensions)
        with _as_httpx(request):
            answer = self._pool.handle_request(core)
        return httpx.Response(status_code=answer.status, headers=answer.headers,
                              stream=_Body(answer), extensions=answer.extensions)

    def close(self) -> None:
        self._pool.close()


def client(destinations: Destinations, *, resolver: Resolver = resolve,
           verify: ssl.SSLContext | bool = True,
           timeout: float = TIMEOUT_SECONDS) -> httpx.Client:
    """An httpx client for webhook deliveries under ``destinations``."""
    return httpx.Client(transport=GuardedTransport(destinations, resolver, verify),
                        timeout=timeout, follow_redirects=False, trust_env=False)


def failure_class(exc: Exception) -> str:
    """The class a failed attempt is stored under (its text goes to the operator's log)."""
    if isinstance(exc, DestinationNotAllowed):
        return DESTINATION_NOT_ALLOWED
    if isinstance(exc, httpx.TimeoutException):
        return TIMED_OUT
    return CONNECTION_FAILED
