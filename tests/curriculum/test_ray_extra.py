"""The `[ray]` extra stays optional: the lean library imports without Ray, and
`curriculum.ray_service` says by name what to install when Ray is missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A child interpreter where `import ray` fails as on a lean install, whether or not Ray is here.
_WITHOUT_RAY = textwrap.dedent("""
    import sys
    sys.modules["ray"] = None  # `import ray` now raises ImportError
    import curriculum, curriculum.env, curriculum.vector
    try:
        import curriculum.ray_service
    except curriculum.MissingExtraError as error:
        assert isinstance(error, ImportError)
        print(type(error).__name__ + ": " + str(error))
    else:
        raise SystemExit("curriculum.ray_service imported without ray")
""")


def test_the_library_imports_without_ray_and_the_service_names_the_extra() -> None:
    result = subprocess.run([sys.executable, "-c", _WITHOUT_RAY], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "MissingExtraError: curriculum.ray_service needs Ray, which the base install does not include: "
        "pip install 'curriculum-harness[ray]' (importing ray failed: "), result.stdout


def test_importing_the_library_does_not_import_ray() -> None:
    code = "import sys, curriculum, curriculum.env; print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
