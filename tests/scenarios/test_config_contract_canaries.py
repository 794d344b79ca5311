"""The config-contract suite fails on configs that break their documented domain."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from curriculum import Curriculum, CurriculumConfig, CurriculumConfigError, SingleTaskGenerator

_PATH = Path(__file__).resolve().parents[2] / "scenarios" / "test_config_contract.py"
_SPEC = importlib.util.spec_from_file_location("config_contract_suite", _PATH)
suite = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = suite  # (as an import does: a dataclass of the suite looks its module up)
_SPEC.loader.exec_module(suite)

_DOMAIN = next(d for d in suite.DOMAINS if d[0].startswith("eviction_percentile"))


def _config(**fields: Any) -> CurriculumConfig:
    return CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}), **fields)


def _lenient(value: Any) -> Any:
    """Accepts anything above 100 (an upper bound dropped)."""
    return _config() if isinstance(value, (int, float)) and value > 100 else _config(eviction_percentile=value)


def _strict(value: Any) -> CurriculumConfig:
    """Refuses the boundary itself (`< 100` for `<= 100`)."""
    if value == 100:
        raise CurriculumConfigError(f"Expected `eviction_percentile` to be a number in [0, 100), received {value!r}")
    return _config(eviction_percentile=value)


def _anonymous(value: Any) -> CurriculumConfig:
    """Refuses the right values with an error that names nothing."""
    try:
        return _config(eviction_percentile=value)
    except CurriculumConfigError:
        raise CurriculumConfigError("invalid config") from None


class _Misreported:
    def __init__(self, value: Any) -> None:
        self.eviction_percentile = 20.0
        _config(eviction_percentile=value)


@pytest.mark.parametrize(("build", "failure", "expected"), [
    (_lenient, pytest.fail.Exception, "outside the documented domain but was accepted"),
    (_strict, pytest.fail.Exception, "is in the documented domain but was refused"),
    (_anonymous, AssertionError, "does not name `eviction_percentile`"),
    (_Misreported, AssertionError, "the config holds 20.0"),
])
def test_the_contract_fails_on_a_broken_field(build, failure, expected) -> None:
    what, _, attribute, accepted, refused = _DOMAIN
    with pytest.raises(failure, match=expected):
        suite.test_a_field_accepts_its_domain_and_refuses_the_rest_by_name(what, build, attribute, accepted, refused)


def test_the_contract_passes_the_built_in_field() -> None:
    suite.test_a_field_accepts_its_domain_and_refuses_the_rest_by_name(*_DOMAIN)


_LOCAL_LOCK_TIMEOUT = next(d for d in suite.OPTIONS if d[0].startswith("lock_timeout") and "local" in d[0])


def _lock_timeout_checked_when_shared(value: Any) -> Curriculum:
    """A local curriculum that leaves `lock_timeout` unchecked ("only a shared one has a lock")."""
    curriculum = Curriculum(_config())
    curriculum.close()
    return curriculum


def test_the_contract_fails_on_an_option_checked_on_one_path_only() -> None:
    what, _, attribute, accepted, refused = _LOCAL_LOCK_TIMEOUT
    with pytest.raises(pytest.fail.Exception, match="outside the documented domain but was accepted"):
        suite.test_a_field_accepts_its_domain_and_refuses_the_rest_by_name(
            what, _lock_timeout_checked_when_shared, attribute, accepted, refused)


def _one_worker_per_batch(num_envs: int, *, batch_size: int | None = None, cores: int | None = None) -> int | None:
    """Bug: the whole-batch test's operands swapped (envs per worker a multiple of the batch)."""
    batch = num_envs if batch_size is None else batch_size
    fitting = [d for d in range(1, min(cores or 1, num_envs) + 1) if num_envs % d == 0 and (num_envs // d) % batch == 0]
    return max(fitting) if fitting else None


def test_the_default_worker_count_check_fails_off_its_definition(monkeypatch) -> None:
    monkeypatch.setattr(suite, "default_num_workers", _one_worker_per_batch)
    with pytest.raises(AssertionError, match=r"differs from its definition in \d+ cases"):
        suite.test_the_default_worker_count_is_the_documented_one()
