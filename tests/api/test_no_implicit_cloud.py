"""A server process never starts a simulated cloud of its own: ``convergence api`` with no
cloud configured refuses a template that needs one at acceptance, naming the setting, and
stores nothing; a template that needs none runs as ever. (The embedded command line keeps its
in-process cloud for a person's own use, and says so: ``tests/cli``.)"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.api_process import api_process

SERVER = {"heat_template_version": "2018-08-31", "resources": {
    "word": {"type": "OS::Heat::RandomString"},
    "vm": {"type": "OS::Nova::Server",
           "properties": {"flavor": "m1.tiny", "image": "cirros",
                          "user_data": {"get_attr": ["word", "value"]}}}}}
WORDS = {"heat_template_version": "2018-08-31",
         "resources": {"word": {"type": "OS::Heat::RandomString"}}}
NO_CLOUD = {"OS_CLOUD": None, "OS_AUTH_URL": None, "OS_CLIENT_CONFIG_FILE": None,
            "CONVERGENCE_BROKER_URL": None, "HOME": None}


def test_the_api_refuses_cloud_templates_without_a_cloud(tmp_path: Path) -> None:
    env = {**NO_CLOUD, "HOME": str(tmp_path / "home")}
    with api_process(tmp_path, "nocloud.db", env) as (_, url, log), \
            httpx.Client(base_url=url, timeout=30) as c:
        r = c.post("/v1/demo/stacks", json={"stack_name": "vm", "template": SERVER})
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert message.startswith("resources.vm.type: OS::Nova::Server needs a cloud")
        assert "OS_CLOUD" in message
        assert c.get("/v1/demo/stacks").json()["stacks"] == []
        # A template of the engine's own types needs no cloud and is accepted.
        r = c.post("/v1/demo/stacks", json={"stack_name": "words", "template": WORDS})
        assert r.status_code == 201, r.text
        shown = c.get(f"/v1/demo/stacks/words/{r.json()['stack']['id']}").json()["stack"]
        assert shown["stack_status"] in ("CREATE_IN_PROGRESS", "CREATE_COMPLETE")
        text = log.read_text()
    # Nothing was started: no simulated cloud's state, clouds.yaml or agent anywhere the
    # API keeps its data, and its log never mentions one.
    assert not list(tmp_path.rglob("simcloud*")) and not list(tmp_path.rglob("clouds.yaml"))
    assert "simulated cloud" not in text.lower()
