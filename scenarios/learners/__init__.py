"""The real-learner tier (installed as `harness.scenarios.learners`): collected only with
`--gate-learners`, and needs the `[learners]` extra."""
