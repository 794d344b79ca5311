"""The scenario suites of the curriculum gate (installed as `harness.scenarios`)."""
