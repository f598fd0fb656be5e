"""A simulated OpenStack cloud that unmodified openstacksdk and the ``openstack`` CLI accept.

Callers: ``convergence simcloud`` (``convergence.cli.simcloud_cmd``) serves it; tests start it
in-process on an ephemeral port with ``convergence_simcloud.serve.running``. The parts:
``state`` (the thread-safe, in-memory :class:`~convergence_simcloud.state.SimCloud`, optionally
saved to a JSON file), ``seed`` (the users, projects and application credentials it starts
with), ``catalog`` (the services and where they are mounted), ``context`` (a request's
token resolved to user, project and roles; the error bodies), ``identity`` (Keystone v3),
``app`` (the ASGI app routing each service by its prefix) and ``serve`` (uvicorn). Nova is
``compute`` and the ``server_*``, ``keypairs``, ``server_groups`` and ``compute_*`` modules;
Neutron the ``network*`` modules; Cinder the ``volume*`` and ``copy_records`` modules;
Glance ``image``. ``faults`` holds the fault rules, ``control`` the ``/_sim/`` control plane
and its middleware, ``journal`` the requests answered, ``client`` a typed client of
``/_sim/``; the ``agent*`` modules the software-configuration agent of the servers that ask
for one (os-collect-config's part: it polls their deployments, runs them and signals back).
It imports nothing of Convergence (its clock protocol is its own, ``clock``): it is a
distribution of its own, ``convergence-simcloud`` (``simcloud/pyproject.toml``), that a
production install leaves out; ``pip install 'convergence[simcloud]'`` adds it.
"""
