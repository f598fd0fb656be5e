"""Other resources' data for the resolver, read from their stored records.

A step resolves a resource's properties from the records of the resources it names, and only
those: the step loads them in one query for its whole batch and hands this mapping over.

Callers: the step (:mod:`convergence.engine.step`), the conclusion's outputs
(:mod:`convergence.engine.conclusion`) and the preview (``convergence.services.preview``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from convergence.ports.views import RecordValues, RecordView
from convergence.template import UnknownValue


class RecordData:
    """``StackData`` over a mapping of name -> current record."""

    def __init__(self, heads: Mapping[str, RecordView] | Mapping[str, RecordValues]) -> None:
        self._heads = heads

    def _get(self, resource: str) -> RecordView | RecordValues:
        record = self._heads.get(resource)
        if record is None or record.action == "INIT":
            raise UnknownValue(f"resource '{resource}'")
        return record

    def reference_id(self, resource: str) -> Any:
        record = self._get(resource)
        return record.reference_id if record.reference_id is not None else record.physical_id

    def attribute(self, resource: str, name: str) -> Any:
        return self._get(resource).attributes.get(name)

    def attributes(self, resource: str) -> Mapping[str, Any]:
        return self._get(resource).attributes
