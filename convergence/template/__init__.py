"""The HOT template language: parse, validate and resolve templates and environments.

Pure: no database, queue, cloud or web imports (an import-linter contract keeps it so).
Callers: the CLI, the API, the engine's planner and step.

- ``parse_template`` checks a document on its own (syntax, sections, functions, references).
- ``validate_stack`` checks a stack: environment, parameter values, conditions, resource types,
  properties, attributes, nested templates and dependency cycles.
- ``TemplateResolver`` resolves one resource's properties or the outputs, lazily.
"""

from convergence.template.constraints import (
    NO_CUSTOM_CONSTRAINTS,
    CustomConstraintRegistry,
    CustomConstraints,
)
from convergence.template.dependencies import find_cycles, resource_dependencies
from convergence.template.environment import (
    Environment,
    load_environment,
    merge_environments,
    parse_environment,
)
from convergence.template.errors import Problem, Problems, TemplateError, format_path
from convergence.template.model import OutputDefinition, ResourceDefinition, Template
from convergence.template.parameters import ParameterSchema
from convergence.template.parse import parse_template
from convergence.template.properties import (
    PropertySchema,
    StaticCatalog,
    TypeCatalog,
    TypeSchema,
)
from convergence.template.resolve import (
    StackData,
    StackIdentity,
    TemplateResolver,
    UnknownValue,
)
from convergence.template.source import DEFAULT_LIMITS, Limits, load_document
from convergence.template.validate import StackDefinition, validate_stack
from convergence.template.versions import VERSIONS, TemplateVersion, lookup_version

__all__ = [
    "DEFAULT_LIMITS",
    "NO_CUSTOM_CONSTRAINTS",
    "VERSIONS",
    "CustomConstraintRegistry",
    "CustomConstraints",
    "Environment",
    "Limits",
    "OutputDefinition",
    "ParameterSchema",
    "Problem",
    "Problems",
    "PropertySchema",
    "ResourceDefinition",
    "StackData",
    "StackDefinition",
    "StackIdentity",
    "StaticCatalog",
    "Template",
    "TemplateError",
    "TemplateResolver",
    "TemplateVersion",
    "TypeCatalog",
    "TypeSchema",
    "UnknownValue",
    "find_cycles",
    "format_path",
    "load_document",
    "load_environment",
    "lookup_version",
    "merge_environments",
    "parse_environment",
    "parse_template",
    "resource_dependencies",
    "validate_stack",
]
