"""``OS::Heat::RandomString``: a random string, regenerated only when its definition changes.

The engine's step calls :class:`RandomStringResource`; the string is generated once, at
create, and stored as the ``value`` attribute (what ``get_attr`` reads) and returned by
``get_resource`` (Heat's reference id). No property can be updated in place, so any change,
typically of ``salt``, replaces the resource and so yields a new string. The generation rules
are Heat's: each character class and sequence contributes at least its ``min`` characters, the
rest is drawn from all of them, and the result is shuffled. Heat draws with the ``random``
module; we use the operating system's generator, since these strings are mostly passwords.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from convergence.plugins.base import PluginBase, PluginContext, Progress, ResourceFailure
from convergence.plugins.heat.none import owner_uuid
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
# Heat's sets: note hexdigits are upper case only.
SEQUENCES: Mapping[str, str] = {
    "lettersdigits": string.ascii_letters + string.digits,
    "letters": string.ascii_letters,
    "lowercase": string.ascii_lowercase,
    "uppercase": string.ascii_uppercase,
    "digits": string.digits,
    "hexdigits": string.digits + "ABCDEF",
    "octdigits": string.octdigits,
}
DEFAULT_LENGTH = 32
DEFAULT_CLASS = "lettersdigits"
_MIN = PropertySchema(INTEGER, "The minimum number of characters from this class or sequence.",
                      default=1, min=1, max=512)

_rng = random.SystemRandom()


def _minimum(entry: Mapping[str, Any]) -> int:
    # Defaults inside list items may not have been applied by the caller: Heat's default is 1.
    value = entry.get("min")
    return 1 if value is None else int(value)


def _class_chars(name: Any) -> str:
    chars = SEQUENCES.get(str(name))
    if chars is None:
        # Normally refused by validation; a value computed at run time may still get here.
        raise ResourceFailure(f"Unknown character class {name!r}; expected one of "
                              f"{', '.join(CHARACTER_CLASSES)}")
    return chars


def _pools(props: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The character pools to draw from, each with its minimum count; validated as Heat does.

    The deprecated ``sequence`` becomes one character class of minimum 1, as Heat's translation
    rule makes it; with neither it nor any class or sequence, the pool is ``lettersdigits``.
    """
    sequence = props.get("sequence")
    classes: Sequence[Mapping[str, Any]] = props.get("character_classes") or []
    sequences: Sequence[Mapping[str, Any]] = props.get("character_sequences") or []
    if sequence and (classes or sequences):
        raise ResourceFailure("Cannot use deprecated 'sequence' property along with "
                              "'character_sequences' or 'character_classes' properties")
    pools = [(str(s["sequence"]), _minimum(s)) for s in sequences]
    pools += [(_class_chars(c.get("class") or DEFAULT_CLASS), _minimum(c)) for c in classes]
    if not pools:
        pools = [(_class_chars(sequence or DEFAULT_CLASS), 0)]
    if any(not chars for chars, _ in pools):
        raise ResourceFailure("A character sequence cannot be empty")
    return pools


def generate(props: Mapping[str, Any]) -> str:
    """A new random string for these properties; :class:`ResourceFailure` if they conflict."""
    length = props.get("length")
    length = DEFAULT_LENGTH if length is None else int(length)
    pools = _pools(props)
    if sum(m for _, m in pools) > length:
        raise ResourceFailure("Length property cannot be smaller than combined character "
                              "class and character sequence minimums")
    chars = [_rng.choice(pool) for pool, minimum in pools for _ in range(minimum)]
    # Heat picks classes against sequences weighted by how many of each there are, then one
    # uniformly: the same as choosing one pool uniformly, which is what this does.
    chars += [_rng.choice(_rng.choice(pools)[0]) for _ in range(length - len(chars))]
    # The minimums were placed first: shuffle so their positions reveal nothing.
    _rng.shuffle(chars)
    return "".join(chars)


class RandomStringResource(PluginBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::RandomString",
        properties={
            "length": PropertySchema(INTEGER, "Length of the string.", default=DEFAULT_LENGTH,
                                     min=1, max=512),
            "sequence": PropertySchema(STRING, "Deprecated: use character_classes.",
                                       allowed_values=CHARACTER_CLASSES),
            "character_classes": PropertySchema(
                LIST, "Character classes and their minimum counts.",
                item=PropertySchema(MAP, schema={
                    "class": PropertySchema(STRING, "A character class.",
                                            default=DEFAULT_CLASS,
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
        # A password, often: kept encrypted, as Heat's; its reference is the value too.
        secret_attributes=frozenset({"value"}), secret_reference=True,
    )

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        # A create repeated after a crash draws a new string; nothing outside the engine saw
        # the first one, since attributes are published only once the engine records them.
        return Progress.finished(owner_uuid(ctx.owner), {"value": generate(props)})

    # update is PluginBase's: no property is update_allowed, so the engine calls it only when
    # nothing changed, and it must keep the stored string (it returns no new attributes).

    def reference_id(self, physical_id: str | None, props: Mapping[str, Any],
                     attributes: Mapping[str, Any]) -> Any:
        # Heat: get_resource gives the string itself, so templates pass it as a password.
        return attributes.get("value", physical_id)
