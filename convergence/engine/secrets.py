"""Which of a resource's values are secrets, to be kept encrypted at rest.

Called by the step runner (:mod:`convergence.engine.step`), which marks what each step writes
with its resource's :class:`~convergence.ports.views.SecretFields` (``RecordChange.secret``);
the store encrypts those values as it writes them and decrypts them as it reads them
(``convergence.store.sealing``). The engine never sees a sealed value, nor a key.

A value is a secret when its resource type says so (``TypeSchema.secret_properties``,
``secret_attributes`` and ``secret_reference``: a server's ``admin_pass``, a key pair's
``private_key``, a random string's value) or when the template gives it one: a hidden
parameter's value (``get_param``, ``Ref``), another resource's secret attribute (``get_attr``)
or secret reference (``get_resource``). A resource whose other properties take a secret may
echo it in any attribute (``OS::Heat::Value``), and in its reference: those are all secrets
then.

Worked out once per template and resource, while the template is in use (weakly keyed by
the parsed template), and only for the resources steps ask about: a resource with no secret
costs a step one look-up.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from convergence.engine.outcomes import StepInput, StepResult
from convergence.ports.views import SecretFields
from convergence.template import StackDefinition, Template, TypeSchema
from convergence.template.functions.base import Call

_PARAMETER_CALLS = frozenset({"get_param", "Ref"})
_ATTRIBUTE_CALLS = frozenset({"get_attr", "Fn::GetAtt"})
_REFERENCE_CALLS = frozenset({"get_resource", "Ref"})


class SecretMarks:
    """The secret fields of resources, by type and template (see the module's docstring)."""

    def __init__(self, schema_of: Callable[[str], TypeSchema | None]) -> None:
        self._schema_of = schema_of
        self._lock = threading.RLock()  # a template may be let go of while it is held
        self._typed: dict[str, SecretFields | None] = {}
        # By the content's id (stacks of one template text with other parameters or
        # environments share its parse, not its marks), while its parsed template lives; the
        # last ``_KEPT`` of them.
        self._templates: dict[str, tuple[weakref.ref[Template], _TemplateMarks]] = {}

    def mark(self, inp: StepInput, result: StepResult) -> StepResult:
        """Mark what a step writes that is secret (``RecordChange.secret``): its resource's
        properties, attributes and reference as its definition makes them."""
        definition, name = inp.definition, inp.node.name
        rtype = definition.resource_types.get(name, inp.record.type) if definition is not None \
            else inp.record.type
        secret = self.of(definition, name, rtype, inp.template_id)
        if secret is not None:
            for change in result.changes:
                if change.values and not change.delete:
                    change.secret = secret
        return result

    def of(self, definition: StackDefinition | None, name: str, rtype: str,
           template_id: str | None = None) -> SecretFields | None:
        """The secret fields of resource ``name`` of type ``rtype`` as ``definition`` (stored
        as ``template_id``) makes it (None: it has none); without a definition (a cleanup),
        those of its type."""
        if definition is None or name not in definition.resource_types:
            return self.of_type(rtype)
        with self._lock:
            return self._marks(definition, template_id).fields(name)

    def outputs(self, definition: StackDefinition, template_id: str | None = None
                ) -> frozenset[str]:
        """The outputs of a stack whose values take a secret (a hidden parameter's value, a
        key pair's private key...): the store keeps them encrypted."""
        with self._lock:
            return self._marks(definition, template_id).outputs()

    def _marks(self, definition: StackDefinition, template_id: str | None) -> _TemplateMarks:
        template = definition.template
        key = template_id or f"parsed:{id(template)}"
        kept = self._templates.get(key)
        marks = kept[1] if kept is not None and kept[0]() is template else None
        if marks is None or marks.types is not definition.resource_types:
            marks = _TemplateMarks(definition, self.of_type)
            self._templates.pop(key, None)
            while len(self._templates) >= _KEPT:
                del self._templates[next(iter(self._templates))]
            self._templates[key] = (weakref.ref(template, self._forget), marks)
        return marks

    def _forget(self, gone: weakref.ref[Template]) -> None:
        """A template no longer in use: its marks go with it."""
        with self._lock:
            for key, (ref, _) in list(self._templates.items()):
                if ref is gone:
                    del self._templates[key]

    def of_type(self, rtype: str) -> SecretFields | None:
        """What resources of type ``rtype`` keep secret, whatever their template."""
        if rtype not in self._typed:
            self._typed[rtype] = typed_fields(self._schema_of(rtype))
        return self._typed[rtype]


def typed_fields(schema: TypeSchema | None) -> SecretFields | None:
    """The secret fields a resource type declares (None: none)."""
    if schema is None or not (schema.secret_properties or schema.secret_attributes or
                              schema.secret_reference):
        return None
    return SecretFields(schema.secret_properties, schema.secret_attributes,
                        reference=schema.secret_reference)


_KEPT = 64  # templates whose marks are kept at once


class _TemplateMarks:
    """One template's secret fields, worked out as steps ask: a resource, and first what it
    reads of others (depth first, without recursion: a chain may be a million long). A
    template with no hidden parameter and no type whose attributes or reference are secret
    has no secret to pass around: its resources have their types' alone."""

    def __init__(self, definition: StackDefinition,
                 typed: Callable[[str], SecretFields | None]) -> None:
        self.types: Mapping[str, str] = definition.resource_types
        self._resources = definition.template.resources
        self._outputs = definition.template.outputs
        self._hidden = frozenset(n for n, p in definition.template.parameters.items()
                                 if p.hidden)
        self._typed_of = typed
        self._sources = bool(self._hidden) or any(
            t is not None and (t.attributes or t.reference)
            for t in map(typed, set(self.types.values())))
        self._fields: dict[str, SecretFields] = {}
        self._taken: dict[str, frozenset[str]] = {}  # the properties that take a secret
        self._echoes: dict[str, bool] = {}  # a property its type does not keep secret does

    def fields(self, name: str) -> SecretFields | None:
        typed = self._typed(name)
        if not self._sources:
            return typed
        self._follow(name)
        taken, echoes = self._taken[name], self._echoes[name]
        if not taken and not echoes:
            return typed
        found = self._fields.get(name)  # kept for the few that take a secret only
        if found is None:
            found = self._fields[name] = SecretFields(
                (typed.properties if typed else frozenset()) | (taken - {_WHOLE}),
                typed.attributes if typed else frozenset(),
                all_attributes=echoes, reference=echoes or bool(typed and typed.reference),
                all_properties=_WHOLE in taken)
        return found

    def outputs(self) -> frozenset[str]:
        if not self._sources:
            return frozenset()
        for output in self._outputs.values():
            for ref in output.references:
                self._follow(ref.target)
        return frozenset(name for name, output in self._outputs.items()
                         if self._secret(output.value))

    def _typed(self, name: str) -> SecretFields | None:
        rtype = self.types.get(name)
        return self._typed_of(rtype) if rtype is not None else None

    def _follow(self, name: str) -> None:
        """Work out what ``name`` and every resource it reads take, the read ones first."""
        stack: list[tuple[str, bool]] = [(name, False)]
        entered: set[str] = set()
        while stack:
            current, ready = stack.pop()
            if current in self._taken:
                continue
            resource = self._resources.get(current)
            if not ready and current not in entered and resource is not None:
                entered.add(current)
                stack.append((current, True))
                stack.extend((ref.target, False) for ref in resource.references
                             if ref.target not in self._taken and ref.target not in entered)
                continue
            props = resource.properties if resource is not None else None
            if isinstance(props, Mapping):
                taken = frozenset(k for k, v in props.items() if self._secret(v))
            else:  # properties given whole by a function
                taken = frozenset({_WHOLE}) if self._secret(props) else frozenset()
            typed = self._typed(current)
            self._taken[current] = taken
            self._echoes[current] = bool(taken - (typed.properties if typed else frozenset()))

    def _secret(self, value: Any) -> bool:
        """Whether ``value`` (a template's data, with calls) takes a secret."""
        if isinstance(value, Call):
            return self._call_secret(value) or self._secret(value.args)
        if isinstance(value, Mapping):
            return any(self._secret(v) for v in value.values())
        if isinstance(value, list | tuple):
            return any(self._secret(v) for v in value)
        return False

    def _call_secret(self, call: Call) -> bool:
        args = call.args
        first = args[0] if isinstance(args, list) and args else args
        if call.name in _PARAMETER_CALLS and self._hidden and \
                (not isinstance(first, str) or first in self._hidden):
            return True  # a hidden parameter, or one named only when it runs
        if not isinstance(first, str) or first not in self.types:
            return False
        typed = self._typed(first)
        echoes = self._echoes.get(first, False)
        if call.name in _REFERENCE_CALLS:
            return echoes or bool(typed and typed.reference)
        if call.name in _ATTRIBUTE_CALLS:
            secret = typed.attributes if typed is not None else frozenset()
            attribute = args[1] if isinstance(args, list) and len(args) > 1 else None
            return echoes or (bool(secret) and (not isinstance(attribute, str) or
                                                attribute in secret))
        return False


_WHOLE = "*"  # the properties, given whole by a function, take a secret
