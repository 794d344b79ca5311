"""Fixtures shared by the curriculum tests (test doubles live in `env_doubles.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from curriculum import Curriculum, CurriculumConfig


@pytest.fixture
def make_curriculum() -> Iterator[Callable[..., Curriculum]]:
    """`make_curriculum(config, shared=False)`; every curriculum made is closed at teardown."""
    made: list[Curriculum] = []

    def make(config: CurriculumConfig, *, shared: bool = False) -> Curriculum:
        curriculum = Curriculum(config, shared_memory=shared)
        made.append(curriculum)
        return curriculum

    yield make
    for curriculum in made:
        curriculum.close()
