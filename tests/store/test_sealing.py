"""The sealer (``convergence.store.sealing``) on its own: what a sealed value looks like, values
written in clear read as they are, a ring of keys that rotates, errors that never show a key,
and the key an embedded database keeps beside it."""

from __future__ import annotations

import multiprocessing
import stat
from pathlib import Path

import pytest

from convergence.errors import ConfigurationError
from convergence.store.sealing import PREFIX, SEALED, Sealer, key_file, make_key, open_sealer

KEY_A, KEY_B = make_key(), make_key()


def test_a_sealed_string_is_marked_and_a_clear_one_reads_as_it_is() -> None:
    sealer = Sealer([KEY_A])
    sealed = sealer.seal("s3cret")
    assert sealed.startswith(PREFIX) and "s3cret" not in sealed
    assert sealer.open(sealed) == "s3cret"
    assert sealer.open("written before encryption") == "written before encryption"


def test_members_are_sealed_by_name_and_opened_whole() -> None:
    sealer = Sealer([KEY_A])
    stored = sealer.seal_members({"name": "web", "admin_pass": "pw", "key": "k"},
                                 {"admin_pass", "key", "absent"})
    assert set(stored) == {"name", SEALED} and "pw" not in repr(stored)
    assert sealer.open_members(stored) == {"name": "web", "admin_pass": "pw", "key": "k"}
    assert sealer.seal_members({"name": "web"}, {"admin_pass"}) == {"name": "web"}
    everything = sealer.seal_members({"a": 1, "b": [2]}, None)
    assert set(everything) == {SEALED}
    assert sealer.open_members(everything) == {"a": 1, "b": [2]}


def test_keys_rotate_newest_first() -> None:
    old = Sealer([KEY_A]).seal("value")
    ring = Sealer([KEY_B, KEY_A])
    assert ring.open(old) == "value"
    again = ring.reseal(old)
    assert Sealer([KEY_B]).open(again) == "value"
    assert Sealer([KEY_B]).open(ring.reseal("in clear")) == "in clear"
    with pytest.raises(ConfigurationError, match="not among CONVERGENCE_ENCRYPTION_KEYS") as e:
        Sealer([KEY_B]).open(old)
    assert KEY_A not in str(e.value) and KEY_B not in str(e.value)


def test_a_malformed_key_is_named_by_position_only() -> None:
    with pytest.raises(ConfigurationError, match="key 2 of 2") as e:
        Sealer([KEY_A, "short"])
    assert "short" not in str(e.value) and KEY_A not in str(e.value)


def _open(url: str, out: multiprocessing.Queue[str]) -> None:
    sealer = open_sealer(url, ())
    out.put(sealer.seal("from " + url))


def test_an_embedded_database_makes_one_key_beside_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'data' / 'c.db'}"
    out: multiprocessing.Queue[str] = multiprocessing.Queue()
    processes = [multiprocessing.Process(target=_open, args=(url, out)) for _ in range(4)]
    for p in processes:
        p.start()
    sealed = [out.get(timeout=60) for _ in processes]
    for p in processes:
        p.join()
    path = key_file(url)
    assert path == tmp_path / "data" / "c.db.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    opened = open_sealer(url, ())  # every process made or found the same key
    assert {opened.open(s) for s in sealed} == {"from " + url}
    assert [p.name for p in path.parent.iterdir()] == ["c.db.key"]  # no temporary left


def test_which_databases_need_keys() -> None:
    assert key_file("sqlite://") is None
    assert open_sealer("sqlite://", ()).keys == 1  # in memory: a key of the process's own
    with pytest.raises(ConfigurationError, match="admin make-key"):
        open_sealer("postgresql://u@db/convergence", ())
    assert open_sealer("postgresql://u@db/convergence", (KEY_A,)).keys == 1
