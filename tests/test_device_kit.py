"""bench/device_kit.sh's refusals (its checks themselves need Erlang and a JAX machine: run
`PYTHON=.venv/bin/python bench/device_kit.sh check` by hand, docs/DEPLOYMENT.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent / "bench" / "device_kit.sh"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(KIT), *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_no_verb_prints_the_usage() -> None:
    got = run()
    assert got.returncode == 2
    assert "usage: bench/device_kit.sh pack | check [OUT]" in got.stderr
    assert run("unpack").returncode == 2


def test_check_without_a_kit_says_how_to_make_one(tmp_path: Path) -> None:
    missing = tmp_path / "nokit"
    got = run("check", env={"DEVKIT": str(missing), "PATH": "/usr/bin:/bin"})
    assert got.returncode == 2
    assert f"no {missing}/erl.tgz: run 'bench/device_kit.sh pack' first" in got.stderr
    assert not (missing / "out").exists()


def test_check_refuses_a_python_without_jax(tmp_path: Path) -> None:
    (tmp_path / "erl.tgz").write_bytes(b"")
    got = run("check", env={"DEVKIT": str(tmp_path), "PYTHON": "/bin/false",
                            "PATH": "/usr/bin:/bin"})
    assert got.returncode == 2
    assert "/bin/false has no JAX: set PYTHON" in got.stderr
