"""Parameter constraints: the ``constraints`` list of a HOT parameter, parsed and checked.

``parameters.py`` parses each parameter's list with :func:`parse_constraints` and checks values
(defaults, environment values, CLI values) with :func:`check_value`; ``validate.py`` passes the
:class:`CustomConstraints` implementation that knows names such as ``nova.flavor``; the
services describe a parameter's constraints in Heat's answers from these classes. The parameter
types and the conversions values are checked in are in ``conversions``.

The rules are Heat's (``heat/engine/constraints.py`` and ``heat/engine/hot/parameters.py``):
which constraint applies to which parameter type, the shape of each, ``allowed_pattern``
matching from the start to the end of the value, ``allowed_values`` comparing in the
parameter's type, and a constraint's ``description`` replacing the error message. Messages
never contain the value of a hidden parameter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from convergence.template.conversions import (
    BOOLEAN,
    COMMA_DELIMITED_LIST,
    JSON,
    NUMBER,
    STRING,
    bool_from_string,
    kind_of,
    show,
    str_to_num,
)
from convergence.template.errors import PARAMETER, Path, Problems


def _num(value: float) -> str:
    return str(int(value)) if isinstance(value, int) or value.is_integer() else str(value)


def _bounds(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"between {_num(low)} and {_num(high)}"
    if low is not None:
        return f"at least {_num(low)}"
    return f"at most {_num(high)}" if high is not None else "anything"


class CustomConstraints(Protocol):
    """Checks for ``custom_constraint`` names (``nova.flavor``...), usually backed by the cloud."""

    def check(self, name: str, value: Any) -> str | None:
        """An error message when ``value`` does not satisfy constraint ``name``, else None."""
        ...

    def known(self, name: str) -> bool:
        """Whether a checker exists for ``name``; unknown names are skipped, not errors."""
        ...


class _NoCustomConstraints:
    __slots__ = ()

    def check(self, name: str, value: Any) -> str | None:
        return None

    def known(self, name: str) -> bool:
        return False


NO_CUSTOM_CONSTRAINTS: CustomConstraints = _NoCustomConstraints()


class CustomConstraintRegistry:
    """Custom constraints from a mapping of name to a function returning an error or None."""

    __slots__ = ("_checks",)

    def __init__(self, mapping: Mapping[str, Callable[[Any], str | None]]) -> None:
        self._checks = dict(mapping)

    def check(self, name: str, value: Any) -> str | None:
        checker = self._checks.get(name)
        return checker(value) if checker is not None else None

    def known(self, name: str) -> bool:
        return name in self._checks


@dataclass(frozen=True, slots=True)
class Length:
    """``length: {min, max}``: the length of a string, a list or a map."""

    kind: ClassVar[str] = "length"
    applies_to: ClassVar[frozenset[str]] = frozenset({STRING, COMMA_DELIMITED_LIST, JSON})
    min: int | None = None
    max: int | None = None
    description: str | None = None

    def failure(self, value: Any, param_type: str, hidden: bool,
                custom: CustomConstraints) -> str | None:
        if not isinstance(value, str | list | dict):
            # Heat accepts any JSON for a json parameter; a bare number has no length.
            return self.description or f"a {kind_of(value)} has no length"
        n = len(value)
        if (self.min is not None and n < self.min) or (self.max is not None and n > self.max):
            bounds = _bounds(self.min, self.max)
            return self.description or f"the length is {n}; it must be {bounds}"
        return None


@dataclass(frozen=True, slots=True)
class Range:
    """``range: {min, max}``: a number within bounds (inclusive)."""

    kind: ClassVar[str] = "range"
    applies_to: ClassVar[frozenset[str]] = frozenset({NUMBER})
    min: int | float | None = None
    max: int | float | None = None
    description: str | None = None

    def failure(self, value: Any, param_type: str, hidden: bool,
                custom: CustomConstraints) -> str | None:
        number = str_to_num(value)
        if (self.min is not None and number < self.min) or \
                (self.max is not None and number > self.max):
            return self.description or \
                f"{show(value, hidden)} is out of range; it must be {_bounds(self.min, self.max)}"
        return None


@dataclass(frozen=True, slots=True)
class Modulo:
    """``modulo: {step, offset}`` (2017-02-24+): ``value % step == offset``."""

    kind: ClassVar[str] = "modulo"
    applies_to: ClassVar[frozenset[str]] = frozenset({NUMBER})
    step: int
    offset: int
    description: str | None = None

    def failure(self, value: Any, param_type: str, hidden: bool,
                custom: CustomConstraints) -> str | None:
        if str_to_num(value) % self.step != self.offset:
            return self.description or (f"{show(value, hidden)} is not a multiple of {self.step} "
                                        f"with an offset of {self.offset}")
        return None


@dataclass(frozen=True, slots=True)
class AllowedValues:
    """``allowed_values: [...]``: the value (or every item of a list) is one of these."""

    kind: ClassVar[str] = "allowed_values"
    applies_to: ClassVar[frozenset[str]] = frozenset(
        {STRING, NUMBER, BOOLEAN, COMMA_DELIMITED_LIST})
    values: tuple[Any, ...]
    description: str | None = None

    def failure(self, value: Any, param_type: str, hidden: bool,
                custom: CustomConstraints) -> str | None:
        allowed = ", ".join(show(a) for a in self.values)
        if isinstance(value, list):
            # As Heat: list items are compared as they are, without conversion.
            bad = [v for v in value if v not in self.values]
            if not bad:
                return None
            if self.description:
                return self.description
            if hidden:
                return f"the value has items that are not allowed (allowed: {allowed})"
            items = ", ".join(show(v) for v in bad)
            verb = "is not an allowed value" if len(bad) == 1 else "are not allowed values"
            return f"{items} {verb} (allowed: {allowed})"
        if _as_type(value, param_type) in self._typed(param_type):
            return None
        return self.description or f"{show(value, hidden)} is not an allowed value " \
            f"(allowed: {allowed})"

    def _typed(self, param_type: str) -> list[Any]:
        typed = []
        for a in self.values:
            try:
                typed.append(_as_type(a, param_type))
            except ValueError:
                continue  # reported when the constraint was parsed
        return typed


def _as_type(value: Any, param_type: str) -> Any:
    """Heat's ``to_schema_type``, by which allowed values and the value are compared."""
    if param_type == NUMBER:
        return str_to_num(value)
    if param_type == BOOLEAN:
        return bool_from_string(value)
    if param_type == STRING:
        return value if isinstance(value, str) else str(value)
    return value


@dataclass(frozen=True, slots=True)
class AllowedPattern:
    """``allowed_pattern: regex``: the regex matches from the start to the end of the string."""

    kind: ClassVar[str] = "allowed_pattern"
    applies_to: ClassVar[frozenset[str]] = frozenset({STRING})
    pattern: str
    description: str | None = None

    def failure(self, value: Any, param_type: str, hidden: bool,
                custom: CustomConstraints) -> str | None:
        text = value if isinstance(value, str) else str(value)
        # Heat uses match() and compares the end, not fullmatch(): with alternatives the two
        # differ ("a|ab" against "ab" fails here), and templates were written against Heat.
        match = re.match(self.pattern, text)
        if match is None or match.end() != len(text):
            return self.description or \
                f"{show(value, hidden)} does not match the pattern {self.pattern!r}"
        return None


@dataclass(frozen=True, slots=True)
class CustomConstraint:
    """``custom_constraint: name``: checked by whoever knows the name; skipped otherwise."""

    kind: ClassVar[str] = "custom_constraint"
    applies_to: ClassVar[frozenset[str]] = frozenset(
        {STRING, NUMBER, BOOLEAN, COMMA_DELIMITED_LIST})
    name: str
    description: str | None = None

    def failure(self, value: Any, param_type: str, hidden: bool,
                custom: CustomConstraints) -> str | None:
        if not custom.known(self.name):
            return None
        # A list of names (networks, flavors) is checked name by name.
        for item in value if isinstance(value, list) else [value]:
            message = custom.check(self.name, item)
            if message is None:
                continue
            if self.description:
                return self.description
            secret = str(item)
            if hidden and (not secret or secret in message):
                return f"the value does not validate {self.name}"
            return message
        return None


Constraint = Length | Range | Modulo | AllowedValues | AllowedPattern | CustomConstraint


@dataclass(frozen=True, slots=True)
class Violation:
    """A constraint a value failed: its position in the list, its kind, and why."""

    index: int
    kind: str
    message: str


def check_value(
    constraints: Sequence[Constraint],
    value: Any,
    param_type: str,
    *,
    hidden: bool = False,
    custom: CustomConstraints = NO_CUSTOM_CONSTRAINTS,
    skip_custom: bool = False,
) -> list[Violation]:
    """Every constraint ``value`` (already converted to ``param_type``) fails, in order.

    ``skip_custom`` leaves custom constraints out, as Heat does when checking a default while
    validating the template alone.
    """
    found: list[Violation] = []
    for i, constraint in enumerate(constraints):
        if skip_custom and isinstance(constraint, CustomConstraint):
            continue
        if param_type not in constraint.applies_to:
            continue  # reported when the constraint was parsed
        try:
            message = constraint.failure(value, param_type, hidden, custom)
        except ValueError:
            message = constraint.description or \
                f"{show(value, hidden)} cannot be checked against a {constraint.kind} constraint"
        if message is not None:
            found.append(Violation(i, constraint.kind, message))
    return found


# Heat picks the first of these present in a constraint entry; the order is Heat's.
_KINDS_BY_PRIORITY = ("modulo", "range", "length", "allowed_values", "allowed_pattern",
                      "custom_constraint")
_ENTRY_KEYS = frozenset({"description", *_KINDS_BY_PRIORITY})
MODULO_VERSION = "2017-02-24"


def parse_constraints(
    data: Any,
    param_type: str | None,
    path: Path,
    problems: Problems,
    *,
    modulo_allowed: bool = True,
    version_name: str | None = None,
) -> tuple[Constraint, ...]:
    """The constraints of one parameter, from its ``constraints`` value at ``path``.

    ``param_type`` None (the type itself was wrong) skips the check of which constraints
    apply to the type. Problems of shape are added; bad entries are left out of the result.
    """
    if data is None:
        return ()
    if not isinstance(data, list):
        problems.add(path, f"constraints must be a list, not a {kind_of(data)}", PARAMETER)
        return ()
    result: list[Constraint] = []
    for i, entry in enumerate(data):
        constraint = _parse_entry(entry, (*path, i), problems, modulo_allowed, version_name)
        if constraint is None:
            continue
        if param_type is not None and param_type not in constraint.applies_to:
            kinds = ", ".join(sorted(constraint.applies_to))
            problems.add((*path, i, constraint.kind), f"a {constraint.kind} constraint does not "
                         f"apply to a {param_type} parameter (it applies to {kinds})", PARAMETER)
            continue
        if isinstance(constraint, AllowedValues) and param_type in (NUMBER, BOOLEAN):
            for j, allowed in enumerate(constraint.values):
                try:
                    _as_type(allowed, param_type)
                except ValueError:
                    problems.add((*path, i, "allowed_values", j), f"allowed value "
                                 f"{show(allowed)} is not a {param_type}", PARAMETER)
        result.append(constraint)
    return tuple(result)


def _parse_entry(entry: Any, path: Path, problems: Problems, modulo_allowed: bool,
                 version_name: str | None) -> Constraint | None:
    if not isinstance(entry, dict):
        problems.add(path, "a constraint must be a map such as {length: {min: 1}}", PARAMETER)
        return None
    ok = True
    for key in entry:
        if key not in _ENTRY_KEYS:
            problems.add((*path, str(key)), f"unknown constraint '{key}'; the constraints are "
                         f"{', '.join(_KINDS_BY_PRIORITY)}", PARAMETER)
            ok = False
    description = entry.get("description")
    if description is not None and not isinstance(description, str):
        if isinstance(description, dict | list):
            problems.add((*path, "description"), "description must be a string", PARAMETER)
            ok = False
        description = str(description)
    if "modulo" in entry and not modulo_allowed:
        # Heat before 2017-02-24 ignores the key (or finds "no constraint expressed"); a
        # template that writes it expects it enforced, so say why it is not.
        this = f" (this template is {version_name})" if version_name else ""
        problems.add((*path, "modulo"), f"the modulo constraint needs heat_template_version "
                     f"{MODULO_VERSION} or later{this}", PARAMETER)
        ok = False
    kinds = [k for k in _KINDS_BY_PRIORITY if k in entry and (k != "modulo" or modulo_allowed)]
    if not kinds:
        if ok:
            problems.add(path, "the constraint expresses nothing: give one of "
                         f"{', '.join(_KINDS_BY_PRIORITY)}", PARAMETER)
        return None
    # Heat uses the first kind present and ignores any other in the same entry.
    kind = kinds[0]
    where = (*path, kind)
    body = entry[kind]
    before = len(problems)
    constraint: Constraint | None
    if kind in ("range", "length"):
        constraint = _parse_bounds(kind, body, where, description, problems)
    elif kind == "modulo":
        constraint = _parse_modulo(body, where, description, problems)
    elif kind == "allowed_values":
        if not isinstance(body, list):
            problems.add(where, f"allowed_values must be a list, not a {kind_of(body)}",
                         PARAMETER)
            return None
        constraint = AllowedValues(tuple(body), description)
    elif kind == "allowed_pattern":
        constraint = _parse_pattern(body, where, description, problems)
    else:
        if not isinstance(body, str) or not body:
            problems.add(where, "custom_constraint must be the name of a constraint, such as "
                         "nova.flavor", PARAMETER)
            return None
        constraint = CustomConstraint(body, description)
    return constraint if ok and len(problems) == before else None


def _check_keys(body: Any, keys: tuple[str, str], where: Path, problems: Problems) -> bool:
    name = where[-1]
    if not isinstance(body, dict):
        problems.add(where, f"a {name} constraint must be a map with {keys[0]} and/or "
                     f"{keys[1]}", PARAMETER)
        return False
    good = True
    for key in body:
        if key not in keys:
            problems.add((*where, str(key)), f"unknown key '{key}' in a {name} constraint; "
                         f"the keys are {keys[0]} and {keys[1]}", PARAMETER)
            good = False
    return good


def _number_at(body: dict[str, Any], key: str, where: Path, problems: Problems,
               integral: bool) -> tuple[bool, int | float | None]:
    raw = body.get(key)
    if raw is None:
        return True, None
    try:
        value = str_to_num(raw)  # Heat's get_num accepts numeric strings too
    except ValueError:
        problems.add((*where, key), f"{key} must be a number, not {show(raw)}", PARAMETER)
        return False, None
    if integral and not isinstance(value, int):
        problems.add((*where, key), f"{key} must be an integer, not {show(raw)}", PARAMETER)
        return False, None
    return True, value


def _parse_bounds(kind: str, body: Any, where: Path, description: str | None,
                  problems: Problems) -> Constraint | None:
    if not _check_keys(body, ("min", "max"), where, problems):
        return None
    integral = kind == "length"  # Heat: "min/max length must be integral"
    ok_min, low = _number_at(body, "min", where, problems, integral)
    ok_max, high = _number_at(body, "max", where, problems, integral)
    if not (ok_min and ok_max):
        return None
    if low is None and high is None:
        problems.add(where, f"a {kind} constraint needs min, max or both", PARAMETER)
        return None
    if kind == "length":
        return Length(int(low) if low is not None else None,
                      int(high) if high is not None else None, description)
    return Range(low, high, description)


def _parse_modulo(body: Any, where: Path, description: str | None,
                  problems: Problems) -> Modulo | None:
    if not _check_keys(body, ("step", "offset"), where, problems):
        return None
    ok_step, step = _number_at(body, "step", where, problems, False)
    ok_offset, offset = _number_at(body, "offset", where, problems, False)
    if not (ok_step and ok_offset):
        return None
    if step is None or offset is None:
        problems.add(where, "a modulo constraint needs both step and offset", PARAMETER)
        return None
    for key, value in (("step", step), ("offset", offset)):
        if isinstance(value, float) and not value.is_integer():
            problems.add((*where, key), f"{key} must be an integer, not {show(value)}",
                         PARAMETER)
            return None
    step_i, offset_i = int(step), int(offset)
    if step_i == 0:
        problems.add((*where, "step"), "step cannot be 0", PARAMETER)
        return None
    if abs(offset_i) >= abs(step_i):
        problems.add((*where, "offset"), "offset must be smaller (by absolute value) than step",
                     PARAMETER)
        return None
    if step_i * offset_i < 0:
        problems.add(where, "step and offset must be both positive or both negative", PARAMETER)
        return None
    return Modulo(step_i, offset_i, description)


def _parse_pattern(body: Any, where: Path, description: str | None,
                   problems: Problems) -> AllowedPattern | None:
    if not isinstance(body, str):
        problems.add(where, f"allowed_pattern must be a string, not a {kind_of(body)}",
                     PARAMETER)
        return None
    try:
        re.compile(body)
    except re.error as exc:
        problems.add(where, f"{body!r} is not a valid regular expression: {exc}", PARAMETER)
        return None
    return AllowedPattern(body, description)
