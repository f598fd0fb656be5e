"""Applying one software deployment on a simulated server: the ``script`` group run for real, as
Heat's heat-config-script hook runs it, and a no-op that succeeds for every other group.

Callers: ``convergence.simcloud.agent`` calls :func:`apply` for each deployment a server's
metadata lists and it has not applied yet, on one of its pool's threads, and signals the
:class:`Result` back (:meth:`Result.signal_body`). A script is written to a scratch folder of
its own (the agent's, per server and deployment, removed afterwards), made executable and run
there with a minimal environment (``PATH``, ``HOME``, ``LANG``), every input as a variable (a
string as it is, anything else as JSON) and ``heat_outputs_path``; each declared output is read
back from the file ``${heat_outputs_path}.NAME``. A script that runs past its time limit is
killed with its whole process group. Other groups (puppet, ansible, salt, ``Heat::Ungrouped``)
do nothing and echo an input as the output of the same name. :class:`Processes` holds the
scripts running, so that stopping the agent ends them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRIPT = "script"
TIMED_OUT = -1  # the status code of a script killed at its time limit
CANNOT_EXECUTE = 126  # as a shell says of a file it cannot run (no ``#!`` line...)
_BUSY_TRIES = 20  # ETXTBSY: another thread's fork still held the script open for a moment


@dataclass(frozen=True, slots=True)
class Result:
    """What applying a deployment gave: what the signal reports."""

    stdout: str
    stderr: str
    status_code: int
    outputs: dict[str, Any] = field(default_factory=dict)

    def signal_body(self) -> dict[str, Any]:
        """The signal's JSON body: the outputs, then ``deploy_stdout``, ``deploy_stderr`` and
        ``deploy_status_code`` (which win over outputs of those names, as in Heat's hook)."""
        body = dict(self.outputs)
        body.update(deploy_stdout=self.stdout, deploy_stderr=self.stderr,
                    deploy_status_code=self.status_code)
        return body


class Stopped(RuntimeError):
    """The agent is stopping: no new script starts."""


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


def inputs_of(deployment: dict[str, Any]) -> dict[str, Any]:
    """The deployment's inputs as name -> value (entries without a name are ignored)."""
    found: dict[str, Any] = {}
    for entry in deployment.get("inputs") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            found[entry["name"]] = entry.get("value")
    return found


def declared_outputs(deployment: dict[str, Any]) -> list[str]:
    """The names of the outputs the deployment's config declares."""
    return [entry["name"] for entry in deployment.get("outputs") or []
            if isinstance(entry, dict) and isinstance(entry.get("name"), str)]


def apply(deployment: dict[str, Any], inputs: dict[str, Any], scratch: Path, timeout: float,
          processes: Processes) -> Result:
    """Apply ``deployment`` (a derived config) with ``inputs``: a script is run in ``scratch``
    (made, then removed) for at most ``timeout`` seconds; another group is a no-op."""
    if deployment.get("group") == SCRIPT:
        try:
            return run_script(deployment, inputs, scratch, timeout, processes)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            with contextlib.suppress(OSError):  # the server's folder, once its last one is gone
                scratch.parent.rmdir()
    return no_op(deployment, inputs)


def no_op(deployment: dict[str, Any], inputs: dict[str, Any]) -> Result:
    """A group this agent has no hook for: success, each input echoed as the output of the
    same name."""
    outputs = {name: inputs[name] for name in declared_outputs(deployment) if name in inputs}
    return Result("", "", 0, outputs)


def environment(inputs: dict[str, Any], outputs_path: Path) -> dict[str, str]:
    """A script's environment: a minimal base, the inputs and ``heat_outputs_path``."""
    env = {"PATH": os.environ.get("PATH") or os.defpath,
           "HOME": os.environ.get("HOME") or str(outputs_path.parent),
           "LANG": os.environ.get("LANG") or "C.UTF-8"}
    for name, value in inputs.items():
        text = value if isinstance(value, str) else json.dumps(value)
        if name and "=" not in name and "\0" not in name and "\0" not in text:
            env[name] = text
    env["heat_outputs_path"] = str(outputs_path)
    return env


def run_script(deployment: dict[str, Any], inputs: dict[str, Any], scratch: Path,
               timeout: float, processes: Processes) -> Result:
    """Run the deployment's config as an executable in ``scratch``: its output, status code
    and declared outputs (the caller removes ``scratch``)."""
    scratch.mkdir(parents=True, exist_ok=True)
    config = deployment.get("config")
    text = config if isinstance(config, str) else json.dumps(config)
    script = scratch / "config"
    descriptor = os.open(script, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o700)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    script.chmod(0o700)
    outputs_path = scratch / "outputs"
    try:
        process = _start(processes, str(script), scratch, environment(inputs, outputs_path))
    except OSError as error:
        return Result("", f"cannot execute the config: {error.strerror}\n", CANNOT_EXECUTE)
    try:
        try:
            out, err = process.communicate(timeout=timeout)
            code = process.returncode
        except subprocess.TimeoutExpired:
            kill_group(process)
            try:
                out, err = process.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a child left its own group and holds a pipe
                out, err = b"", b""
            err += f"\nthe script timed out after {timeout:g} seconds and was killed\n".encode()
            code = TIMED_OUT
    finally:
        processes.finished(process)
    return Result(out.decode(errors="replace"), err.decode(errors="replace"), code,
                  read_outputs(deployment, outputs_path))


def _start(processes: Processes, script: str, scratch: Path,
           env: dict[str, str]) -> subprocess.Popen[bytes]:
    for attempt in range(_BUSY_TRIES):
        try:
            return processes.start([script], cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as error:
            if error.errno != errno.ETXTBSY or attempt == _BUSY_TRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


def read_outputs(deployment: dict[str, Any], outputs_path: Path) -> dict[str, str]:
    """The declared outputs the script wrote (``<outputs_path>.NAME``), less one trailing
    newline each."""
    found: dict[str, str] = {}
    for name in declared_outputs(deployment):
        if not name or "/" in name or "\0" in name:
            continue
        path = outputs_path.with_name(f"{outputs_path.name}.{name}")
        try:
            value = path.read_text(errors="replace")
        except OSError:
            continue
        found[name] = value[:-1] if value.endswith("\n") else value
    return found
