"""Reading a record's deletion policy: stamped, else from the template it was converged to,
even one that no longer validates as a whole; never guessed as Delete when it cannot be told."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from convergence.engine.definitions import build_definition
from convergence.engine.deletion import (
    DELETE,
    RETAIN,
    SNAPSHOT,
    canonical,
    definition_policy,
    record_policy,
)
from convergence.plugins.registry import PluginRegistry
from convergence.ports.views import RecordView, TemplateContent
from convergence.template import StackDefinition

CATALOG = PluginRegistry.from_entry_points()


def content(policy: Any, *, rtype: str = "OS::Heat::TestResource",
            parameters: Mapping[str, Any] | None = None) -> TemplateContent:
    doc = {"heat_template_version": "2018-08-31",
           "parameters": {"policy": {"type": "string", "default": "Delete"}},
           "resources": {"k": {"type": rtype, "deletion_policy": policy}}}
    return TemplateContent(json.dumps(doc), parameters=dict(parameters or {}))


def record(*, stamped: str | None = None, template_id: str | None = "t1") -> RecordView:
    return RecordView(id=7, stack_id="s", name="k", type="OS::Heat::TestResource",
                      physical_id="p", action="CREATE", status="COMPLETE", status_reason="",
                      template_id=template_id, generation=1, requires=(), replaces=None,
                      replaced_by=None, properties={}, attributes={}, reference_id=None,
                      operation=None, fencing_token=1, lease_owner=None, created_at=0.0,
                      updated_at=0.0, deletion_policy=stamped)


def read(rec: RecordView, stored: TemplateContent) -> str | None:
    def definition(template_id: str) -> StackDefinition:
        assert template_id == "t1"
        return build_definition(stored, CATALOG)  # raises TemplateError when invalid now

    return record_policy(rec, definition, lambda template_id: stored)


def test_policies_in_either_spelling() -> None:
    assert [canonical(p) for p in ("Retain", "retain", "Snapshot", "delete", "Keep", 1)] == \
        [RETAIN, RETAIN, SNAPSHOT, DELETE, None, None]


def test_the_definition_gives_the_policy_from_parameters() -> None:
    definition = build_definition(content({"get_param": "policy"},
                                          parameters={"policy": "retain"}), CATALOG)
    assert definition_policy(definition, "k") == RETAIN
    assert definition_policy(definition, "absent") is None


def test_a_stamped_record_needs_no_template() -> None:
    def nothing(template_id: str) -> Any:
        raise AssertionError("no template is read for a stamped record")

    assert record_policy(record(stamped="Retain"), nothing, nothing) == RETAIN


def test_an_unstamped_record_reads_the_template_it_was_converged_to() -> None:
    assert read(record(), content("Retain")) == RETAIN
    assert read(record(), content({"get_param": "policy"})) == DELETE


def test_a_template_that_no_longer_validates_still_gives_the_resource_s_policy() -> None:
    # Its type is gone from this release's plugins: the template as a whole is invalid, the
    # resource's own policy is still there to read, literal or from the stored parameters.
    gone = "Vendor::Removed"
    assert read(record(), content("Retain", rtype=gone)) == RETAIN
    assert read(record(), content({"get_param": "policy"}, rtype=gone,
                                  parameters={"policy": "Retain"})) == RETAIN


def test_a_policy_that_cannot_be_told_is_none_not_delete() -> None:
    # The parameter it names is defined nowhere any more: nothing may be deleted on a guess.
    unknown = content({"get_param": "other"}, rtype="Vendor::Removed")
    assert read(record(), unknown) is None


def test_a_record_never_converged_nor_stamped_is_deleted() -> None:
    # Only a crash before a step's first result leaves one: no definition ever applied.
    assert read(record(template_id=None), content("Retain")) == DELETE
