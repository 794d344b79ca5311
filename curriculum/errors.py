"""Named errors of the curriculum library.

Each says what was expected and what was received; raising one never leaves a curriculum
half-updated. Each is also the builtin kind a caller already catches: config, score, state and
agent-count errors are `ValueError`s, an unknown task a `LookupError`, a lock timeout a
`TimeoutError`, an env that breaks the wrappers' contract a `TypeError`, a missing extra an
`ImportError`, and the rest (closed, dead or untrusted resources) `RuntimeError`s.
"""

from __future__ import annotations

__all__ = [
    "CurriculumError",
    "CurriculumConfigError",
    "InvalidScoreError",
    "UnknownTaskError",
    "CurriculumStateError",
    "LockTimeoutError",
    "SharedTrackerError",
    "WorkerCopyError",
    "CurriculumClosedError",
    "EnvContractError",
    "AgentCountError",
    "EpisodeNotStartedError",
    "WorkerProcessError",
    "CurriculumServiceError",
    "MissingExtraError",
]


class CurriculumError(Exception):
    """Base class of every error this library raises on purpose."""


class CurriculumConfigError(CurriculumError, ValueError):
    """A config field is outside its allowed range or of the wrong type."""


class InvalidScoreError(CurriculumError, ValueError):
    """A score is NaN, infinite or outside the curriculum's `score_range`."""


class UnknownTaskError(CurriculumError, LookupError):
    """A task id that this curriculum never issued."""

    def __str__(self) -> str:  # LookupError would quote the message like a key
        return str(self.args[0]) if self.args else ""


class CurriculumStateError(CurriculumError, ValueError):
    """A state blob that is corrupted or was saved by a differently configured curriculum."""


class LockTimeoutError(CurriculumError, TimeoutError):
    """The shared tracker's lock could not be taken within its timeout."""


class SharedTrackerError(CurriculumError, RuntimeError):
    """A shared-memory tracker cannot be created, found or trusted: missing, not a tracker,
    owned by another user, writable by others, or reached through a symbolic link."""


class WorkerCopyError(CurriculumError, RuntimeError):
    """A private per-process copy of a local curriculum was asked to record a completion."""


class CurriculumClosedError(CurriculumError, RuntimeError):
    """A curriculum (or its shared tracker's lock) was used after `close()`; only `close()`
    may be called again."""


class EnvContractError(CurriculumError, TypeError):
    """A wrapped env lacks what a curriculum wrapper needs (`set_env_config`, in-place buffers)."""


class AgentCountError(CurriculumError, ValueError):
    """An env's `num_agents` disagrees with its buffers or with the vector's buffer slice."""


class EpisodeNotStartedError(CurriculumError, RuntimeError):
    """A curriculum env (or vecenv) was stepped before its `reset()`, or after an episode end
    or reset that failed."""


class WorkerProcessError(CurriculumError, RuntimeError):
    """A vectorized worker process died (or hung past `worker_timeout`); the vecenv closed
    itself and refuses every later call, as does a vecenv closed by its owner."""


class CurriculumServiceError(CurriculumError, RuntimeError):
    """A curriculum service (`curriculum.ray_service`) is dead, unreachable or did not answer
    within the client's timeout, or the client was used after `close()`. Completions not yet
    acknowledged stay with the client and are sent again by its next flush."""


class MissingExtraError(CurriculumError, ImportError):
    """An optional part of the library was imported without the extra that installs what it
    needs (`pip install 'curriculum-harness[ray]'` for `curriculum.ray_service`)."""
