"""The pinned environment (requirements.lock) and the suites' time factor."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest

from tests.helpers import REPO, TIME_SCALE_VAR, scaled, time_scale


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not an exact pin"
            pins[_name(name)] = version.strip()
    return pins


def test_the_lock_pins_every_requirement_of_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    missing = sorted({_name(r) for r in wanted} - _lock().keys())
    assert missing == [], f"not in requirements.lock (run make lock): {missing}"


def test_the_lock_keeps_jax_on_the_line_that_runs_on_python_3_11() -> None:
    assert _lock()["jax"].startswith("0.10.")
    assert _lock()["jaxlib"] == _lock()["jax"]


def test_every_locked_package_installed_here_has_the_locked_version() -> None:
    """make installs with the lock as constraints: a .venv that drifted from it (an older
    install, a hand-run pip) is named here rather than giving other numbers."""
    drifted = {}
    for name, version in _lock().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # an extra this venv did not install (bench)
        if installed != version:
            drifted[name] = (installed, version)
    assert drifted == {}, f"installed vs requirements.lock (rm -rf .venv; make test): {drifted}"


def test_the_time_scale_multiplies_every_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_SCALE_VAR, raising=False)
    assert time_scale() == 1.0 and scaled(30) == 30
    monkeypatch.setenv(TIME_SCALE_VAR, "2.5")
    assert scaled(30) == 75
    for bad in ("0", "-1", "fast", "inf", "nan"):
        monkeypatch.setenv(TIME_SCALE_VAR, bad)
        with pytest.raises(ValueError, match=TIME_SCALE_VAR):
            time_scale()
