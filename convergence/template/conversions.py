"""Values as HOT parameters and properties read them: the parameter types and Heat's conversions.

Callers: ``constraints`` (checking values in a parameter's type), ``parameters`` (converting a
stack's values), ``properties`` (booleans of resource properties) and ``environment`` (merging
numeric ``parameter_defaults``). ``show`` is the one way a value appears in a message, so that
a hidden parameter's value never does.

The conversions are Heat's: numbers from numeric strings (``Schema.str_to_num``) and booleans
by oslo.utils' ``strutils.bool_from_string(strict=True)`` words.
"""

from __future__ import annotations

from typing import Any

# The HOT parameter types.
STRING = "string"
NUMBER = "number"
BOOLEAN = "boolean"
JSON = "json"
COMMA_DELIMITED_LIST = "comma_delimited_list"
PARAMETER_TYPES = (STRING, NUMBER, COMMA_DELIMITED_LIST, JSON, BOOLEAN)

# oslo.utils strutils.bool_from_string(strict=True), which Heat uses for boolean parameters.
TRUE_STRINGS = frozenset({"1", "t", "true", "on", "y", "yes"})
FALSE_STRINGS = frozenset({"0", "f", "false", "off", "n", "no"})
_BOOL_WORDS = ", ".join(sorted(TRUE_STRINGS | FALSE_STRINGS))


def str_to_num(value: Any) -> int | float:
    """A number from a number or a numeric string, as Heat's ``Schema.str_to_num``.

    Raises ValueError. Booleans are refused although Python counts them as numbers: a
    ``true`` given for a number is a mistake, not 1.
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, int | float):
        return value
    if not isinstance(value, str):
        raise ValueError(f"a {kind_of(value)} is not a number")
    try:
        return int(value)
    except ValueError:
        return float(value)


def bool_from_string(value: Any) -> bool:
    """A boolean as Heat reads one: ``str(value)`` against strutils' words. Raises ValueError."""
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in TRUE_STRINGS:
        return True
    if lowered in FALSE_STRINGS:
        return False
    raise ValueError(f"not a boolean; use one of {_BOOL_WORDS}")


def kind_of(value: Any) -> str:
    """What a value is called in a message: map, list, boolean, number, null or string."""
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return "string" if isinstance(value, str) else type(value).__name__


def show(value: Any, hidden: bool = False) -> str:
    """A value as it appears in a message: short, and never the value of a hidden parameter."""
    if hidden:
        return "the value"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
