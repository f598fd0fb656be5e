"""What applying one software deployment gives on a simulated server, and the runs the agent
simulates rather than executes.

Callers: ``convergence_simcloud.agent`` reads a deployment's inputs (:func:`inputs_of`) and
applies it: a ``script`` config is executed on this host only when whoever started the cloud
asked for it (``Options.agent_execute_scripts``, ``convergence simcloud --execute-scripts``;
``convergence_simcloud.agent_scripts``, which builds its :class:`Result` here too); otherwise
its run is simulated (:func:`simulate`): it succeeds, says in ``deploy_stdout`` and
``deploy_stderr`` that it was simulated, and each declared output takes the input of the same
name, as the groups this agent has no hook for do, or else a value derived from the
deployment's name, the output's name and the inputs (:func:`simulated_value`), so that one
deployment's outputs feed the next and change when their inputs change. Every other group
(puppet, ansible, salt, ``Heat::Ungrouped``) is :func:`no_op`: success, and an input echoed as
the output of the same name. The agent signals the :class:`Result` back
(:meth:`Result.signal_body`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

SCRIPT = "script"
TIMED_OUT = -1  # the status code of a script killed at its time limit
CANNOT_EXECUTE = 126  # as a shell says of a file it cannot run (no ``#!`` line...)
SIMULATED_STDERR = ("this simulated cloud does not execute scripts: the run was simulated "
                    "(whoever starts it may allow it: convergence simcloud --execute-scripts)\n")


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


def deployment_name(deployment: dict[str, Any]) -> str:
    """The name the agent logs and derives values from: the deployment's, or its id."""
    return str(deployment.get("name") or deployment.get("id") or "")


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


def no_op(deployment: dict[str, Any], inputs: dict[str, Any]) -> Result:
    """A group this agent has no hook for: success, each input echoed as the output of the
    same name."""
    outputs = {name: inputs[name] for name in declared_outputs(deployment) if name in inputs}
    return Result("", "", 0, outputs)


def simulated_value(name: str, output: str, inputs: dict[str, Any]) -> str:
    """The value a simulated run gives ``output`` of the deployment ``name``: the same for the
    same inputs (the ``deploy_*`` ones, which name the server, the action and the signal, left
    out), another when one of them changes: ``NAME.OUTPUT:`` and 12 hex digits."""
    given = {key: value for key, value in inputs.items() if not key.startswith("deploy_")}
    text = json.dumps([name, output, given], sort_keys=True, default=str,
                      separators=(",", ":"))
    return f"{name}.{output}:{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def simulate(deployment: dict[str, Any], inputs: dict[str, Any]) -> Result:
    """A ``script`` config not executed: success, saying so, with each declared output the
    input of the same name or else :func:`simulated_value`."""
    name = deployment_name(deployment)
    outputs = {output: inputs[output] if output in inputs else
               simulated_value(name, output, inputs)
               for output in declared_outputs(deployment)}
    return Result(f"simulated run of {name}: the script was not executed\n",
                  SIMULATED_STDERR, 0, outputs)
