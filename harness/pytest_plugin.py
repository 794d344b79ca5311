"""pytest plugin of the curriculum harness (registered through the `pytest11` entry point)."""

from __future__ import annotations
