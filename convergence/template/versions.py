"""The HOT template versions: for each, its sections, keys and table of functions.

Heat models versions as an 11-class inheritance chain; here each version is one value built by
adding to and removing from the table of the version before it, so what a version changed is
read off in one place. Used by the parser (which functions exist where), the validator (which
sections and keys are allowed) and the resolver (version-dependent behaviour).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from convergence.template.functions import collections as col
from convergence.template.functions import conditions as cnd
from convergence.template.functions import references as ref
from convergence.template.functions import repeat as rpt
from convergence.template.functions import replace as rp
from convergence.template.functions import strings as st
from convergence.template.functions import yaql_expr as yq
from convergence.template.functions.base import FunctionDef, removed

SECTIONS_BASE = frozenset(
    {"heat_template_version", "description", "parameter_groups", "parameters", "resources",
     "outputs"}
)
RESOURCE_KEYS_BASE = frozenset(
    {"type", "properties", "metadata", "depends_on", "update_policy", "deletion_policy"}
)
OUTPUT_KEYS_BASE = frozenset({"value", "description"})
PARAMETER_KEYS_BASE = frozenset(
    {"type", "label", "description", "default", "hidden", "constraints", "immutable"}
)


@dataclass(frozen=True, slots=True)
class TemplateVersion:
    """One ``heat_template_version``: what a template of that version may contain."""

    name: str
    alias: str | None
    order: int
    functions: Mapping[str, FunctionDef]
    condition_functions: Mapping[str, FunctionDef]
    sections: frozenset[str]
    resource_keys: frozenset[str]
    output_keys: frozenset[str]
    parameter_keys: frozenset[str]
    modulo_constraint: bool = False
    all_attributes: bool = False  # get_attr with no attribute name (2015-10-15+)
    if_elision: bool = False  # two-argument if drops the item (2021-04-16+)

    def __str__(self) -> str:
        return self.name if self.alias is None else f"{self.name} ({self.alias})"

    def added_in(self, function: str) -> TemplateVersion | None:
        """The first version that has ``function``, for error messages."""
        for v in VERSIONS:
            if function in v.functions and not _is_removed(v.functions[function]):
                return v
        return None


def _is_removed(fn: FunctionDef) -> bool:
    return fn.extra.get("removed", False) is True


def _gone(name: str, replacement: str = "") -> FunctionDef:
    fn = removed(name, replacement)
    return replace(fn, extra={"removed": True})


def _table(*defs: FunctionDef, base: Mapping[str, FunctionDef] | None = None,
           drop: tuple[str, ...] = ()) -> Mapping[str, FunctionDef]:
    table = dict(base or {})
    for name in drop:
        table.pop(name, None)
    for d in defs:
        table[d.name] = d
    return MappingProxyType(table)


_CFN_GONE = (
    _gone("Fn::GetAZs"), _gone("Fn::Join", "list_join"), _gone("Fn::Split", "str_split"),
    _gone("Fn::Replace", "str_replace"), _gone("Fn::Base64"),
    _gone("Fn::MemberListToMap"), _gone("Fn::ResourceFacade", "resource_facade"),
    _gone("Ref", "get_resource or get_param"), _gone("Fn::GetAtt", "get_attr"),
)

F_2013 = _table(
    ref.GET_PARAM, ref.GET_RESOURCE, ref.GET_ATTR, ref.GET_FILE, ref.RESOURCE_FACADE,
    st.LIST_JOIN, rp.STR_REPLACE,
    ref.REF, ref.FN_GETATT, ref.FN_RESOURCE_FACADE, ref.FN_GETAZS,
    col.FN_SELECT, st.FN_JOIN, st.FN_SPLIT, rp.FN_REPLACE, st.FN_BASE64,
    col.FN_MEMBER_LIST_TO_MAP,
)
F_2014 = _table(*_CFN_GONE, base=F_2013)
F_2015_04 = _table(rpt.REPEAT, st.DIGEST, base=F_2014)
F_2015_10 = _table(
    ref.GET_ATTR_ALL, st.LIST_JOIN_MULTI, rp.STR_REPLACE_JSON, st.STR_SPLIT,
    _gone("Fn::Select", "get_attr or get_param with a path"), base=F_2015_04,
)
F_2016_04 = _table(col.MAP_MERGE, base=F_2015_10)
F_NEWTON = _table(yq.YAQL, col.MAP_REPLACE, cnd.IF, rpt.REPEAT_WITH_MAP, base=F_2016_04)
F_OCATA = _table(col.FILTER, rp.STR_REPLACE_STRICT, base=F_NEWTON)
F_PIKE = _table(
    st.MAKE_URL, col.LIST_CONCAT, col.LIST_CONCAT_UNIQUE, rp.STR_REPLACE_VSTRICT, col.CONTAINS,
    rpt.REPEAT_PERMUTATIONS, base=F_OCATA,
)
F_WALLABY = _table(cnd.IF_ELIDE, base=F_PIKE)

C_NEWTON = _table(ref.GET_PARAM, cnd.EQUALS, cnd.NOT, cnd.AND, cnd.OR)
C_PIKE = _table(yq.YAQL, col.CONTAINS, base=C_NEWTON)

_NO_CONDITIONS: Mapping[str, FunctionDef] = MappingProxyType({})

_S_NEWTON = SECTIONS_BASE | {"conditions"}
_R_NEWTON = RESOURCE_KEYS_BASE | {"condition", "external_id"}
_O_NEWTON = OUTPUT_KEYS_BASE | {"condition"}
_P_QUEENS = PARAMETER_KEYS_BASE | {"tags"}


def _v(order: int, name: str, alias: str | None, functions: Mapping[str, FunctionDef],
       conditions: Mapping[str, FunctionDef] = _NO_CONDITIONS, *, newton: bool = False,
       queens: bool = False, modulo: bool = False, all_attributes: bool = False,
       if_elision: bool = False) -> TemplateVersion:
    return TemplateVersion(
        name=name, alias=alias, order=order, functions=functions,
        condition_functions=conditions,
        sections=_S_NEWTON if newton else SECTIONS_BASE,
        resource_keys=_R_NEWTON if newton else RESOURCE_KEYS_BASE,
        output_keys=_O_NEWTON if newton else OUTPUT_KEYS_BASE,
        parameter_keys=_P_QUEENS if queens else PARAMETER_KEYS_BASE,
        modulo_constraint=modulo, all_attributes=all_attributes, if_elision=if_elision,
    )


VERSIONS: tuple[TemplateVersion, ...] = (
    _v(0, "2013-05-23", None, F_2013),
    _v(1, "2014-10-16", None, F_2014),
    _v(2, "2015-04-30", None, F_2015_04),
    _v(3, "2015-10-15", None, F_2015_10, all_attributes=True),
    _v(4, "2016-04-08", None, F_2016_04, all_attributes=True),
    _v(5, "2016-10-14", "newton", F_NEWTON, C_NEWTON, newton=True, all_attributes=True),
    _v(6, "2017-02-24", "ocata", F_OCATA, C_NEWTON, newton=True, modulo=True,
       all_attributes=True),
    _v(7, "2017-09-01", "pike", F_PIKE, C_PIKE, newton=True, modulo=True, all_attributes=True),
    _v(8, "2018-03-02", "queens", F_PIKE, C_PIKE, newton=True, queens=True, modulo=True,
       all_attributes=True),
    _v(9, "2018-08-31", "rocky", F_PIKE, C_PIKE, newton=True, queens=True, modulo=True,
       all_attributes=True),
    _v(10, "2021-04-16", "wallaby", F_WALLABY, C_PIKE, newton=True, queens=True, modulo=True,
       all_attributes=True, if_elision=True),
)

_BY_KEY: dict[str, TemplateVersion] = {}
for _ver in VERSIONS:
    _BY_KEY[_ver.name] = _ver
    if _ver.alias:
        _BY_KEY[_ver.alias] = _ver

# Every name that is a function in some version: a single-key map using one of these names is
# a call, and if the template's version lacks it, that is an error naming the version.
ALL_FUNCTION_NAMES: frozenset[str] = frozenset(
    name for v in VERSIONS for name in (*v.functions, *v.condition_functions)
)

VERSION_NAMES: tuple[str, ...] = tuple(_BY_KEY)


def lookup_version(value: object) -> TemplateVersion | None:
    """The version for a ``heat_template_version`` value (a date or a release alias)."""
    if not isinstance(value, str):
        return None
    return _BY_KEY.get(value.strip())


DELETION_POLICIES = ("Delete", "Retain", "Snapshot")


def _first_versions(keys_of: Callable[[TemplateVersion], frozenset[str]]) -> dict[Any, str]:
    """For each key some version allows, the first version that does (for messages)."""
    first: dict[Any, str] = {}
    for v in VERSIONS:
        for key in keys_of(v):
            first.setdefault(key, v.name)
    return first


FIRST_WITH_SECTION = _first_versions(lambda v: v.sections)
FIRST_WITH_RESOURCE_KEY = _first_versions(lambda v: v.resource_keys)
FIRST_WITH_OUTPUT_KEY = _first_versions(lambda v: v.output_keys)


def deletion_policies(version: TemplateVersion) -> tuple[str, ...]:
    """The deletion policies a version allows: Newton added the lower-case spellings."""
    return DELETION_POLICIES + (tuple(p.lower() for p in DELETION_POLICIES)
                                if "condition" in version.resource_keys else ())
