"""Fixtures and hooks of the scenario suites (options come from the `harness.pytest_plugin` entry point)."""

from harness.fixtures import *  # noqa: F401,F403  (fixtures and hooks, listed in harness.fixtures.__all__)
