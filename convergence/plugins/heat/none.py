"""``OS::Heat::None``: accepts any properties, offers any attribute (as None), never changes.

Used mostly in environments to switch other types off (``OS::Foo: OS::Heat::None``).
"""

from __future__ import annotations

from typing import ClassVar

from convergence.template.properties import TypeSchema


class NoneResource:
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::None",
        properties=None,
        attributes=None,
        description="A resource that does nothing; any properties are accepted and ignored.",
    )
