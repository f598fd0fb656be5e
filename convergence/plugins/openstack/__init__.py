"""OpenStack resource types, driven through openstacksdk: Nova, Neutron and Cinder.

Callers: the registry finds each type through the ``convergence.resources`` entry points; the
engine's steps call them like any plugin. ``clouds`` builds the one backend they share (the
connections to the clouds the engine works on), ``errors`` translates openstacksdk's
exceptions into the plugin port's retry meaning once, and ``resource`` is the base every type
here is written on. openstacksdk is imported nowhere else in the engine.
"""
