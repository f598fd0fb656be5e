"""Executing a ``script`` software config on this host, confined, for a simulated cloud whose
starter asked for it (``convergence simcloud --execute-scripts``, ``Options.
agent_execute_scripts``); otherwise the agent simulates the run
(``convergence_simcloud.agent_hooks.simulate``) and nothing here runs.

Callers: ``convergence_simcloud.agent`` resolves the account once (:func:`run_as`, which
``convergence.cli.simcloud_cmd`` also calls to refuse a bad ``--script-user`` at start), holds
one :class:`Processes` (so that stopping the agent kills the scripts under way) and calls
:func:`run_script` on one of its pool's threads, as Heat's heat-config-script hook runs a
config: the config written to a file and executed, every input as an environment variable (a
string as it is, anything else as JSON), each declared output read back from the file
``${heat_outputs_path}.NAME``.

The confinement, as far as plain processes go:

- never as root: when this process is root the script runs as an unprivileged account (the
  starter's ``--script-user``, default ``nobody``: its uid and primary gid, no supplementary
  group; an account whose uid or gid is 0 is refused);
- in a new, empty working directory owned by that account, which is also its ``HOME``, inside a
  folder of the agent's that the account may pass through but not change (the script file and
  the outputs folder are there), all removed afterwards;
- with an environment of its own (``PATH``, ``HOME``, ``LANG``, ``USER``, ``LOGNAME``, the inputs
  and ``heat_outputs_path``): nothing of this process's environment;
- for at most the time limit: then its whole process group is killed and the run fails
  (status code :data:`~convergence_simcloud.agent_hooks.TIMED_OUT`) saying it timed out;
- what it sends back is capped at ``limit`` bytes each for stdout and stderr (the rest read and
  dropped, and said) and for the outputs together: an output beyond that, or one that is not a
  regular file the script wrote itself (a link to a file of someone else's), is refused and
  the refusal said in stderr.

Not confined: the network, what the account may write elsewhere (world-writable folders), the
disk its working directory takes, a process that leaves its session.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from convergence_simcloud.agent_hooks import (
    CANNOT_EXECUTE,
    TIMED_OUT,
    Result,
    Stopped,
    declared_outputs,
)

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KILL_GRACE = 5.0  # seconds the pipes are still read after a kill (a child that left may hold them)
_CHUNK = 65536
_BUSY_TRIES = 20  # ETXTBSY: another thread's fork still held the script open for a moment


@dataclass(frozen=True, slots=True)
class Account:
    """The unprivileged account scripts run as when this process is root."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True, slots=True)
class Limits:
    """How a script runs: its time limit (seconds), the bytes it may send back per stream and
    for its outputs together, and the account (None: this process's own, which is not root)."""

    timeout: float
    output_limit: int
    account: Account | None


def run_as(user: str) -> Account | None:
    """The account scripts run as: None when this process is not root (they run as it);
    otherwise ``user`` (a name or a uid) looked up. ValueError when there is no such account
    or it is root's (uid or gid 0)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, ValueError, OverflowError):
        raise ValueError(f"script user {user!r}: no such user on this host") from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise ValueError(f"script user {user!r}: scripts never run as root (uid or gid 0)")
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)


class Processes:
    """The scripts running now (each the leader of its own process group)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    def start(self, argv: list[str], **options: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._closed:
                raise Stopped("the agent is stopping")
            process = subprocess.Popen(argv, start_new_session=True, **options)
            self._running.add(process)
            return process

    def finished(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.discard(process)

    def kill_all(self) -> None:
        """Kill every running script (and whatever it started); start no more."""
        with self._lock:
            self._closed = True
            running = list(self._running)
        for process in running:
            kill_group(process)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def run_script(deployment: dict[str, Any], inputs: dict[str, Any], limits: Limits,
               processes: Processes) -> Result:
    """Run the deployment's config in a folder made for this run (removed afterwards): its
    output, status code and declared outputs, within ``limits``."""
    folder = Path(tempfile.mkdtemp(prefix="simcloud-script-"))
    try:
        return _run(deployment, inputs, limits, processes, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # links in it are removed, not followed


def _run(deployment: dict[str, Any], inputs: dict[str, Any], limits: Limits,
         processes: Processes, folder: Path) -> Result:
    account = limits.account
    if account is None and os.geteuid() == 0:
        return Result("", "the agent never runs a script as root\n", CANNOT_EXECUTE)
    folder.chmod(0o711)  # the account passes through; it may neither list nor change it
    work, outputs = folder / "work", folder / "outputs"
    for made in (work, outputs):
        made.mkdir(mode=0o700)
        if account is not None:
            os.chown(made, account.uid, account.gid)
    config = deployment.get("config")
    text = config if isinstance(config, str) else json.dumps(config)
    script = folder / "config"
    descriptor = os.open(script, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o555)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    outputs_path = outputs / "heat_outputs"
    env = environment(inputs, work, outputs_path, account)
    try:
        process = _start(processes, str(script), work, env, account)
    except OSError as error:
        return Result("", f"cannot execute the config: {error.strerror}\n", CANNOT_EXECUTE)
    try:
        out, err, timed_out = _collect(process, limits.timeout, limits.output_limit)
    finally:
        processes.finished(process)
    code = TIMED_OUT if timed_out else process.returncode
    if timed_out:
        err += f"\nthe script timed out after {limits.timeout:g} seconds and was killed\n"
    owner = account.uid if account is not None else os.geteuid()
    found, refused = read_outputs(deployment, outputs_path, limits.output_limit, owner)
    return Result(out, err + "".join(f"{note}\n" for note in refused), code, found)


def environment(inputs: dict[str, Any], home: Path, outputs_path: Path,
                account: Account | None) -> dict[str, str]:
    """A script's whole environment: a fixed base, the inputs and ``heat_outputs_path``."""
    user = account.name if account is not None else _own_name()
    env = {"PATH": SAFE_PATH, "HOME": str(home), "LANG": "C.UTF-8", "USER": user,
           "LOGNAME": user}
    for name, value in inputs.items():
        text = value if isinstance(value, str) else json.dumps(value)
        if name and "=" not in name and "\0" not in name and "\0" not in text:
            env[name] = text
    env["heat_outputs_path"] = str(outputs_path)
    return env


def _own_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _start(processes: Processes, script: str, work: Path, env: dict[str, str],
           account: Account | None) -> subprocess.Popen[bytes]:
    identity: dict[str, Any] = {} if account is None else {
        "user": account.uid, "group": account.gid, "extra_groups": []}
    for attempt in range(_BUSY_TRIES):
        try:
            return processes.start([script], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   umask=0o077, **identity)
        except OSError as error:
            if error.errno != errno.ETXTBSY or attempt == _BUSY_TRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


class _Kept:
    """The first ``limit`` bytes of a stream; the rest counted, not kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.data), 0)
        self.data += chunk[:room]
        self.dropped += max(len(chunk) - room, 0)

    def text(self, stream: str) -> str:
        text = self.data.decode(errors="replace")
        if self.dropped:
            text += (f"\n[{stream} cut at {self.limit} bytes: {self.dropped} more bytes "
                     "dropped]\n")
        return text


def _collect(process: subprocess.Popen[bytes], timeout: float,
             limit: int) -> tuple[str, str, bool]:
    """Read the script's stdout and stderr (capped) until it ends or its time is up (then its
    group is killed): the two texts and whether it timed out."""
    assert process.stdout is not None and process.stderr is not None
    kept: dict[IO[bytes], _Kept] = {process.stdout: _Kept(limit), process.stderr: _Kept(limit)}
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        with selectors.DefaultSelector() as selector:
            for pipe in kept:
                selector.register(pipe, selectors.EVENT_READ)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    if timed_out:
                        break  # a process that left the group still holds a pipe
                    kill_group(process)
                    timed_out, deadline = True, time.monotonic() + KILL_GRACE
                    continue
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, _CHUNK)
                    if chunk:
                        kept[key.fileobj].add(chunk)  # type: ignore[index]
                    else:
                        selector.unregister(key.fileobj)
        if not timed_out:
            try:
                process.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:  # it closed its pipes and went on
                kill_group(process)
                timed_out = True
        if timed_out:
            process.kill()
            process.wait()
    finally:
        for pipe in kept:
            pipe.close()
    return kept[process.stdout].text("stdout"), kept[process.stderr].text("stderr"), timed_out


class _Refused(Exception):
    """An output file the agent does not take back (the message says why)."""


def read_outputs(deployment: dict[str, Any], outputs_path: Path, limit: int,
                 owner: int) -> tuple[dict[str, str], list[str]]:
    """The declared outputs the script wrote (``<outputs_path>.NAME``, less one trailing
    newline each), at most ``limit`` bytes together, and what was refused, said."""
    found: dict[str, str] = {}
    refused: list[str] = []
    budget = limit
    for name in declared_outputs(deployment):
        if not name or "/" in name or "\0" in name:
            continue
        path = outputs_path.with_name(f"{outputs_path.name}.{name}")
        try:
            data = _read_capped(path, budget, owner, limit)
        except FileNotFoundError:
            continue
        except _Refused as refusal:
            refused.append(f"output {name} refused: {refusal}")
            continue
        budget -= len(data)
        value = data.decode(errors="replace")
        found[name] = value[:-1] if value.endswith("\n") else value
    return found, refused


def _read_capped(path: Path, budget: int, owner: int, limit: int) -> bytes:
    """The file's bytes if it is a regular file of ``owner``'s, not a link, of at most
    ``budget`` bytes (FileNotFoundError when there is none; :class:`_Refused` otherwise)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise _Refused("a symbolic link" if error.errno == errno.ELOOP
                       else f"it cannot be read ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != owner:
            raise _Refused("not a regular file the script wrote")
        data = handle.read(budget + 1)
    if len(data) > budget:
        raise _Refused(f"larger than what is left of the {limit} bytes the outputs of a "
                       "script may take together")
    return data
