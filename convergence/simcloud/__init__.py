"""A simulated OpenStack cloud that unmodified openstacksdk and the ``openstack`` CLI accept.

Callers: ``convergence simcloud`` (``convergence.cli.simcloud_cmd``) serves it; tests start it
in-process on an ephemeral port with ``convergence.simcloud.serve.running``. The parts:
``state`` (the thread-safe, in-memory :class:`~convergence.simcloud.state.SimCloud`, optionally
saved to a JSON file), ``seed`` (the users, projects and application credentials it starts
with), ``catalog`` (the services and where they are mounted), ``context`` (a request's
token resolved to user, project and roles; the error bodies), ``identity`` (Keystone v3),
``app`` (the ASGI app routing each service by its prefix) and ``serve`` (uvicorn). The other
services (``compute``, ``network``, ``volume``, ``image``) are added as modules beside
``identity`` and mounted in ``app``. It imports nothing of the engine, the use cases, the store
or the runtime.
"""
