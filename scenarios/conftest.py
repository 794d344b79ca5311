"""Scenario gate fixtures come from the `harness.pytest_plugin` entry point; nothing else here."""
