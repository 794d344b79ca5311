"""Deep copies of plain data (task configs, checkpoints) for the checks that alter or keep them.

`copy.deepcopy` spends most of its time on its memo of shared objects, which a config or a
checkpoint made of dicts, lists and scalars does not have: `plain_copy` copies those directly,
several times faster, and hands anything else to `copy.deepcopy`. It is the harness's own,
not the library's config copy, so a library copy that shares a nested list is not hidden by
a check that copies the same way.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["plain_copy"]

_SCALARS = frozenset({int, float, str, bool, type(None)})


def plain_copy(value: Any) -> Any:
    """A deep copy of `value` (dicts, lists and scalars copied directly, the rest deep-copied)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: plain_copy(item) for key, item in value.items()}
    if kind is list:
        return [plain_copy(item) for item in value]
    return copy.deepcopy(value)
