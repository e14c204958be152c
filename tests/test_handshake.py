"""py_backend/handshake.py: the digest of the worker's sources and the checks at start."""

from __future__ import annotations

import shutil
from pathlib import Path

import py_backend
from py_backend import handshake


def test_the_digest_covers_every_source_file_and_only_those(tmp_path: Path) -> None:
    copy = tmp_path / "py_backend"
    shutil.copytree(handshake.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    digest = handshake.source_digest(copy)
    assert digest == handshake.source_digest()
    (copy / "notes.txt").write_text("not a source")
    assert handshake.source_digest(copy) == digest
    with (copy / "lower.py").open("a") as f:
        f.write("\n# an edit\n")
    edited = handshake.source_digest(copy)
    assert edited != digest
    # a subpackage's files count, by their path in the package
    with (copy / "ops" / "grad.py").open("a") as f:
        f.write("\n# an edit\n")
    assert handshake.source_digest(copy) != edited


def test_mismatches_are_named_and_matches_pass(tmp_path: Path) -> None:
    digest = handshake.source_digest()
    version = str(py_backend.PROTOCOL_VERSION)
    assert handshake.mismatch({}) is None
    assert handshake.mismatch({"NX_JAX_EXPECT_PROTOCOL": version,
                               "NX_JAX_EXPECT_SOURCES": digest}) is None
    why = handshake.mismatch({"NX_JAX_EXPECT_PROTOCOL": "7", "NX_JAX_EXPECT_SOURCES": "ab"})
    assert why is not None
    assert f"the Elixir side speaks protocol 7, this worker {version}" in why
    assert f"({handshake.PACKAGE}, digest {digest})" in why
    assert "compiled with (digest ab)" in why and "mix compile --force" in why
