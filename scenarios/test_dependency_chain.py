"""Dependency chain: sampling mass moves along the chain, and all tasks are mastered in
clearly fewer episodes than uniform random practice needs.

Bug class (seeds/000, 001): a curriculum whose sampling stops reacting to completions (lost
updates, a stale distribution) degrades silently to uniform, and the chain takes far longer.
Each check judges its mean over `DEPENDENCY_CHAIN.seeds` seeds (`harness.experiments`); the
first seed's run is checked by the accounting oracle.
"""

from __future__ import annotations

import pytest

from harness.experiments import checks_of


@pytest.mark.xdist_group("dependency_chain")  # its checks share the setup's runs (`--dist loadgroup`)
@pytest.mark.parametrize("check", [check.name for check in checks_of("dependency_chain")])
def test_chain_is_mastered_in_order_and_faster_than_uniform(judge, check: str) -> None:
    judge(check)
