"""Secrets sealed at rest: Fernet encryption of the few values that are secrets, with rotation.

Callers: ``convergence.runtime`` builds one :class:`Sealer` per process with
:func:`open_sealer` and hands it to the :class:`~convergence.store.transactions.Store`, whose
aggregates seal what they write and open what they read: ``stacks`` (the values of hidden
parameters in a template's parameters, environments and files), ``records`` and ``rows``
(the properties and attributes a step marks secret: ``RecordChange.secret``), ``webhooks``
(a subscription's signing secret) and ``software`` (the engine's own signing key);
``rekeying.py`` seals everything again with the newest key (``convergence db
rotate-keys``); the CLI makes keys (``convergence admin make-key``). Nothing above the store
sees a sealed value, nor this module: the use cases and the engine only say *which* values
are secrets.

Keys are Fernet keys (``CONVERGENCE_ENCRYPTION_KEYS``, comma-separated, newest first): the
first seals, every one opens (``MultiFernet``), so a new key is put first, everything is
sealed again with it, and the old one is then dropped. Without the setting, an embedded
SQLite database gets a key made once and kept in a file of mode 0600 beside it
(``<database>.key``: never in the database); a database in memory, a key of the process's
own; any other database (PostgreSQL, shared by processes on several machines) refuses to
open (:class:`~convergence.errors.ConfigurationError`, saying how to make a key).

What is sealed is marked, so that rows written in clear before encryption still read (and
are sealed when next written): a sealed string starts with :data:`PREFIX`; a JSON object
keeps its sealed members, as one sealed JSON text, under the member :data:`SEALED`. A key is
never logged nor put in an error, nor is a value.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import make_url

from convergence.errors import ConfigurationError

PREFIX = "$fernet$"  # a sealed string: this, then the Fernet token
SEALED = "$sealed"  # the member of a JSON object that holds its sealed members
KEYS_SETTING = "CONVERGENCE_ENCRYPTION_KEYS"
MAKE_KEY = ("convergence admin make-key (or: python -c \"from cryptography.fernet import "
            "Fernet; print(Fernet.generate_key().decode())\")")


class Sealer:
    """Seals and opens values with a ring of Fernet keys: the first seals, all open."""

    __slots__ = ("_ring", "keys")

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        if not keys:
            raise ConfigurationError(f"{KEYS_SETTING}: no key given; make one with {MAKE_KEY}")
        fernets = []
        for i, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key))
            except (ValueError, TypeError):
                # Never the key itself: which one of the list, and what a key must be.
                raise ConfigurationError(
                    f"{KEYS_SETTING}: key {i} of {len(keys)} is not a Fernet key (32 "
                    f"url-safe base64-encoded bytes); make one with {MAKE_KEY}") from None
        self._ring = MultiFernet(fernets)
        self.keys = len(fernets)

    def __repr__(self) -> str:
        return f"Sealer({self.keys} key(s))"

    # strings -----------------------------------------------------------------------------
    def seal(self, clear: str) -> str:
        return PREFIX + self._ring.encrypt(clear.encode()).decode()

    def open(self, stored: str) -> str:
        """A stored string in clear: opened if sealed, as it is if written in clear."""
        if not stored.startswith(PREFIX):
            return stored
        try:
            return self._ring.decrypt(stored[len(PREFIX):].encode()).decode()
        except InvalidToken:
            raise ConfigurationError(
                f"a secret stored encrypted cannot be decrypted: the key it was sealed with "
                f"is not among {KEYS_SETTING} (or the value is damaged)") from None

    def reseal(self, stored: str) -> str:
        """A stored string sealed with the newest key (one in clear is sealed)."""
        if not stored.startswith(PREFIX):
            return self.seal(stored)
        try:
            return PREFIX + self._ring.rotate(stored[len(PREFIX):].encode()).decode()
        except InvalidToken:
            return self.seal(self.open(stored))  # raises the error above

    # members of JSON objects -------------------------------------------------------------
    def seal_members(self, obj: Mapping[str, Any], names: Collection[str] | None
                     ) -> dict[str, Any]:
        """``obj`` with its members ``names`` (None: every member) sealed, under
        :data:`SEALED`; as it is when it has none of them. A member sealed already (read back
        sealed, written again) stays so."""
        taken = [k for k in obj if k != SEALED and (names is None or k in names)]
        if not taken:
            return dict(obj)
        kept = {k: v for k, v in obj.items() if k not in taken}
        secret = {k: obj[k] for k in taken}
        if SEALED in kept:
            secret = {**self._open_json(kept.pop(SEALED)), **secret}
        kept[SEALED] = self.seal(json.dumps(secret, separators=(",", ":")))
        return kept

    def open_members(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj`` with its sealed members in clear (the caller checked ``SEALED in obj``)."""
        out = {k: v for k, v in obj.items() if k != SEALED}
        out.update(self._open_json(obj[SEALED]))
        return out

    def reseal_members(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj`` with its sealed members sealed with the newest key."""
        if SEALED not in obj:
            return dict(obj)
        return {**obj, SEALED: self.reseal(str(obj[SEALED]))}

    def _open_json(self, stored: Any) -> dict[str, Any]:
        opened = json.loads(self.open(str(stored)))
        return dict(opened) if isinstance(opened, Mapping) else {}


def opened(sealer: Sealer, obj: Any) -> Any:
    """A JSON object as stored, its sealed members opened (anything else as it is)."""
    return sealer.open_members(obj) if isinstance(obj, Mapping) and SEALED in obj else obj


def make_key() -> str:
    """A new Fernet key, as ``CONVERGENCE_ENCRYPTION_KEYS`` takes it."""
    return Fernet.generate_key().decode()


# the keys of a process ---------------------------------------------------------------------

def key_file(database_url: str) -> Path | None:
    """Where an embedded SQLite database's own key is kept: ``<database>.key`` beside it;
    None for a database in memory and for any other database."""
    url = make_url(database_url)
    database = url.database
    if url.get_backend_name() != "sqlite" or database in (None, "", ":memory:") or \
            url.query.get("mode") == "memory" or str(database).startswith("file:"):
        return None
    return Path(os.path.abspath(os.path.expanduser(str(database)))).with_name(
        Path(str(database)).name + ".key")


def _memory(database_url: str) -> bool:
    url = make_url(database_url)
    return url.get_backend_name() == "sqlite" and (
        url.database in (None, "", ":memory:") or url.query.get("mode") == "memory")


def open_sealer(database_url: str, keys: Sequence[str]) -> Sealer:
    """The sealer of a process on ``database_url``: the keys configured; else, on an
    embedded SQLite database, the key kept beside it (made now the first time); in memory,
    a key of this process's own. Any other database without keys is refused: its processes
    must share a key nobody reads from the database (see the module's docstring)."""
    if keys:
        return Sealer(keys)
    path = key_file(database_url)
    if path is not None:
        return Sealer([_kept_key(path)])
    if _memory(database_url):
        return Sealer([make_key()])
    raise ConfigurationError(
        f"{KEYS_SETTING} is not set: on a server database the secrets the engine stores "
        f"(hidden parameters, private keys, passwords, webhook secrets, the signing key) are "
        f"encrypted with keys every process is given. Make one with {MAKE_KEY}, and set "
        f"{KEYS_SETTING} to it for the API, the workers and every command.")


def _kept_key(path: Path) -> str:
    """The key in ``path``, made (random, mode 0600) if there is none yet. Two processes
    starting together keep one key: each writes its own to a temporary file and links it
    into place, which fails for the second; both then read the first's."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(make_key() + "\n")
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    key = path.read_text().strip()
    if not key:
        raise ConfigurationError(f"{path} is empty: it should hold the key this database's "
                                 f"secrets are encrypted with")
    return key


def random_sealer() -> Sealer:
    """A sealer with a key of its own, for a store built without one (tests, tools): what
    it seals only it can open."""
    return Sealer([make_key()])
