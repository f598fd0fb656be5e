"""``OS::Heat::RandomString``: a random string, regenerated only when its definition changes."""

from __future__ import annotations

from typing import ClassVar

from convergence.template.properties import (
    INTEGER,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

CHARACTER_CLASSES = (
    "lettersdigits", "letters", "lowercase", "uppercase", "digits", "hexdigits", "octdigits",
)
_MIN = PropertySchema(INTEGER, "The minimum number of characters from this class or sequence.",
                      default=1, min=1, max=512)


class RandomStringResource:
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::RandomString",
        properties={
            "length": PropertySchema(INTEGER, "Length of the string.", default=32, min=1,
                                     max=512),
            "sequence": PropertySchema(STRING, "Deprecated: use character_classes.",
                                       allowed_values=CHARACTER_CLASSES),
            "character_classes": PropertySchema(
                LIST, "Character classes and their minimum counts.",
                item=PropertySchema(MAP, schema={
                    "class": PropertySchema(STRING, "A character class.",
                                            default="lettersdigits",
                                            allowed_values=CHARACTER_CLASSES),
                    "min": _MIN,
                }),
            ),
            "character_sequences": PropertySchema(
                LIST, "Character sequences and their minimum counts.",
                item=PropertySchema(MAP, schema={
                    "sequence": PropertySchema(STRING, "A character sequence.", required=True,
                                               min=1),
                    "min": _MIN,
                }),
            ),
            "salt": PropertySchema(STRING, "Change it to generate a new string."),
        },
        attributes=frozenset({"value"}),
        description="Generates a random string.",
    )
