"""Request bodies: JSON parsed with a bound on nesting, checked before the parser runs.

Callers: ``convergence.api.requests.json_body`` (every route that takes a JSON body: stacks,
validate, previews, actions, mark-unhealthy, software configs and deployments),
``convergence.api.requests.signal_body`` (the signals: a resource's ``.../signal`` and the
signed URLs ``/v1/signed/{token}``) and ``convergence.api.subscriptions``.

Python's JSON parser recurses once per level: a body of 100,000 ``[`` exhausts the stack
(``RecursionError``). So the nesting is measured first, without recursion and at C speed: the
strings are cut out (a bracket inside a string does not nest), the remaining brackets are
turned into +1/-1 and their running sum is the depth. A body may nest as deep as a template
may (``convergence.template.DEFAULT_LIMITS.max_depth``) below its top-level object, so that
any template, environment or value the template limits allow fits in a body.

The measure agrees with the parser up to the first place where the body stops being valid
JSON (an unterminated string), which the parser refuses at that very place: it never goes
deeper than what was measured.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any

from convergence.api.errors import ApiError
from convergence.template import DEFAULT_LIMITS

MALFORMED = "MalformedRequestBody"

# A string, or what is left of the text after an unterminated one (the parser stops there):
# every match attempt at a quote succeeds, so the scan is linear whatever the body.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
# Opening brackets become 1, closing ones 255, read back as signed bytes: +1 and -1.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def nesting_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest, outside its strings (0: a scalar)."""
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    steps = array("b", brackets.encode("ascii").translate(_STEPS))
    return max(accumulate(steps))


def too_deep(limit: int) -> ApiError:
    return ApiError(400, MALFORMED, f"The request body is refused: nesting is deeper than "
                    f"{limit} levels below its top level.")


def parse_json(raw: bytes, max_depth: int = DEFAULT_LIMITS.max_depth) -> Any:
    """The JSON value of a request body; 400 when it is not JSON or nests too deep.

    ``max_depth`` counts the levels below the top-level value.
    """
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
    except (UnicodeDecodeError, LookupError) as exc:
        raise ApiError(400, MALFORMED, f"The request body is not valid JSON: {exc}") from None
    if nesting_depth(text) > max_depth + 1:
        raise too_deep(max_depth)
    try:
        return json.loads(text)
    except RecursionError:  # not expected after the measure; refused all the same
        raise too_deep(max_depth) from None
    except ValueError as exc:
        raise ApiError(400, MALFORMED, f"The request body is not valid JSON: {exc}") from None
