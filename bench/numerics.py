"""What numerics mode ``nx`` costs against ``native`` (py_backend/numerics.py).

The mode is fixed when ``py_backend`` is imported, so each mode runs in its own process; this
script runs both, alternately, and prints each workload's time per call and the ratio nx/native
of each pair (docs/BENCHMARKS.md, section 7)::

    .venv/bin/python bench/numerics.py            # 3 pairs
    .venv/bin/python bench/numerics.py --pairs 5

``--mode nx|native`` runs one process's measurement (what the pairs call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# this checkout's worker code, whatever the virtualenv's editable install points at
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure() -> dict[str, float]:
    """Median milliseconds per call of each workload, in this process's mode."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from py_backend import numerics, program
    from py_backend.ops import elementwise

    assert numerics.mode() == os.environ["NX_JAX_NUMERICS"]

    from py_backend.program import decode_graph
    from tests.helpers import GraphBuilder

    tanh, sigmoid, exp, add, multiply = (
        elementwise.function(name) for name in ("tanh", "sigmoid", "exp", "add", "multiply")
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1_000_000).astype(np.float32)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 512)) / 20).astype(np.float32)

    def graph(build) -> Callable[..., jax.Array]:
        """One output of a graph built by ``build(g)``, lowered as the worker lowers it."""
        g = GraphBuilder()
        run = program.lower(decode_graph(g.binary([build(g)])))
        return lambda *args: run(*args)[0]

    def product(g: GraphBuilder) -> int:
        pa, pw = g.param(0, "f32", (256, 512)), g.param(1, "f32", (512, 512))
        contract, batch = [[1], [0]], [[], []]
        return g.op("dot", pa, pw, contract_axes=contract, batch_axes=batch,
                    out=("f32", (256, 512)))

    def row_sums(g: GraphBuilder) -> int:
        px = g.param(0, "f32", (1000, 1000))
        return g.op("sum", px, axes=[1], keep_axes=False, out=("f32", (1000,)))

    matmul, sums = graph(product), graph(row_sums)

    def elementwise(x: jax.Array) -> jax.Array:
        return add(multiply(tanh(x), sigmoid(x)), exp(-(x * x)))

    def loss(w: jax.Array, a: jax.Array) -> jax.Array:
        return jnp.sum(tanh(matmul(a, w)) ** 2)

    workloads = {
        "elementwise 1M (tanh*sigmoid+exp)": (jax.jit(elementwise), (x,)),
        "grad of tanh layer 256x512x512": (jax.jit(jax.grad(loss)), (w, a)),
        "matmul 256x512x512": (jax.jit(matmul), (a, w)),
        "row sums 1000x1000": (jax.jit(sums), (x.reshape(1000, 1000),)),
    }
    result = {}
    for name, (fn, args) in workloads.items():
        fn(*args).block_until_ready()
        times = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(20):
                fn(*args).block_until_ready()
            times.append((time.perf_counter() - start) / 20 * 1e3)
        result[name] = statistics.median(times)
    return result


def run_mode(mode: str) -> dict[str, float]:
    env = {**os.environ, "NX_JAX_NUMERICS": mode}
    out = subprocess.run(
        [sys.executable, __file__, "--mode", mode], env=env, check=True, capture_output=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["nx", "native"])
    parser.add_argument("--pairs", type=int, default=3)
    opts = parser.parse_args()
    if opts.mode:
        print(json.dumps(measure()))
        return
    ratios: dict[str, list[float]] = {}
    for pair in range(opts.pairs):
        nx, native = run_mode("nx"), run_mode("native")
        for name in nx:
            ratios.setdefault(name, []).append(nx[name] / native[name])
            print(f"pair {pair + 1}: {name}: nx {nx[name]:.3f} ms, native {native[name]:.3f} ms")
    for name, values in ratios.items():
        print(
            f"{name}: nx/native median {statistics.median(values):.2f} "
            f"(min {min(values):.2f}, max {max(values):.2f}, {len(values)} pairs)"
        )


if __name__ == "__main__":
    main()
