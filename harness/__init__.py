"""Validation harness: simulated students, test envs, runners and scenario tooling for curricula."""
