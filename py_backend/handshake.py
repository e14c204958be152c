"""What this worker is, checked when it starts: the protocol version it speaks and a digest of
its sources, against what the Elixir side that started it expects (``NX_JAX_EXPECT_PROTOCOL``,
``NX_JAX_EXPECT_SOURCES``, set by ``NxJax.Worker.Server``). A worker that differs answers
``ping`` and ``info`` and refuses everything else with a ``WorkerMismatch`` error naming both
sides, rather than running code the Elixir side was not built with (a moved or copied project
whose virtualenv points elsewhere, an edit that was not recompiled)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import py_backend

PACKAGE = Path(py_backend.__file__).resolve().parent


def source_digest(package: Path = PACKAGE) -> str:
    """MD5 over the package's ``*.py`` files, its subpackages' included, in the order of their
    paths relative to the package (``ops/grad.py``), each as ``path NUL content NUL``
    (``NxJax.Worker.Sources`` computes the same at compile time)."""
    digest = hashlib.md5()
    named = sorted((p.relative_to(package).as_posix().encode(), p) for p in package.rglob("*.py"))
    for name, path in named:
        digest.update(name + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def mismatch(env: Mapping[str, str], package: Path = PACKAGE) -> str | None:
    """Why this worker is not the one the Elixir side expects, or ``None`` (also when it was
    started without expectations, as the tests start it)."""
    problems = []
    protocol = env.get("NX_JAX_EXPECT_PROTOCOL")
    if protocol is not None and protocol != str(py_backend.PROTOCOL_VERSION):
        problems.append(f"the Elixir side speaks protocol {protocol}, this worker "
                        f"{py_backend.PROTOCOL_VERSION}")
    expected = env.get("NX_JAX_EXPECT_SOURCES")
    if expected is not None:
        actual = source_digest(package)
        if actual != expected:
            problems.append(f"its Python sources ({package}, digest {actual}) are not the "
                            f"ones the Elixir side was compiled with (digest {expected})")
    if not problems:
        return None
    return ("this worker is not the one nx_jax was built with: " + "; ".join(problems) +
            ". Recompile the Elixir side against these sources (`mix compile --force` in the "
            "project that holds them), or point it at its own virtualenv (`make deps`)")
