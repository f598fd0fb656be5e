"""A production install has no simulated cloud (``convergence-simcloud``, an optional
distribution: ``pip install 'convergence[simcloud]'``), and the commands that would use it say
so instead of failing with an import traceback.

Each case runs ``convergence`` in a fresh interpreter in which ``convergence_simcloud`` cannot be
imported, as when it is not installed (``sys.modules`` holding None for it: ``import`` raises
``ModuleNotFoundError`` and ``importlib.util.find_spec`` finds nothing): ``convergence demo``
and ``convergence simcloud`` stop with the message, and the embedded command line with no cloud
configured refuses a template that needs one at acceptance, naming both ways out and storing
nothing. ``tests/packaging_check.sh`` checks the same on a real install of the main wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# ``convergence ARGS`` with the simulated cloud's package made unimportable.
PROBE = """
import sys
sys.modules["convergence_simcloud"] = None
from convergence.cli import main
sys.argv = ["convergence", *sys.argv[1:]]
main()
"""
INSTALL = "pip install 'convergence[simcloud]'"
SERVER = """heat_template_version: 2018-08-31
resources:
  vm:
    type: OS::Nova::Server
    properties: {flavor: m1.tiny, image: cirros}
"""


def without_simcloud(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``convergence ARGS`` as a production install would, with no cloud configured."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OS_") and k != "CONVERGENCE_BROKER_URL"}
    env.update(HOME=str(tmp_path / "home"),  # no ~/.config/openstack/clouds.yaml either
               CONVERGENCE_DATABASE_URL=f"sqlite:///{tmp_path / 'user.db'}",
               CONVERGENCE_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("args", "said"), [
    (["demo"], "convergence demo runs its stack in a simulated cloud, which is not installed"),
    (["simcloud", "--port", "1"],
     "convergence simcloud serves the simulated cloud, which is not installed"),
])
def test_the_commands_that_serve_it_say_how_to_install_it(
        tmp_path: Path, args: list[str], said: str) -> None:
    done = without_simcloud(tmp_path, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"Error: {said} (the convergence-simcloud distribution): {INSTALL}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "user.db").exists()


def test_the_embedded_command_line_refuses_a_cloud_template_saying_both_ways(
        tmp_path: Path) -> None:
    template = tmp_path / "server.yaml"
    template.write_text(SERVER)
    done = without_simcloud(tmp_path, "stack", "create", "vm", "-t", str(template))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    refused = [line for line in done.stderr.splitlines()
               if line.startswith("resources.vm.type: OS::Nova::Server needs a cloud")]
    assert refused, done.stderr
    assert "the simulated cloud this command would serve instead is not installed" in refused[0]
    assert "set OS_CLOUD" in refused[0] and INSTALL in refused[0]
    # Nothing was stored, and no simulated cloud was started anywhere.
    listed = without_simcloud(tmp_path, "stack", "list", "-f", "value")
    assert listed.returncode == 0 and listed.stdout.strip() == "", listed.stderr
    assert not list(tmp_path.rglob("simcloud*"))
