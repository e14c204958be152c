"""Reverse-mode gradient through a while loop with no bound known in advance
(``py_backend.ops.control_flow.reversible_while``, the lowering of ``while`` without
``max_iterations``): time per iteration for n = 10, 100, 1000, 10000, against the same loop's
forward pass.

    .venv/bin/python bench/while_grad.py        (make bench-while)

Each figure is the median of 7 timed calls of a jitted function (compiled first), in
microseconds; the loop's state is a vector of 4096 float32 values. Per-iteration figures
have the call with no iteration (n = 0) taken off.
"""

from __future__ import annotations

import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from py_backend.ops.control_flow import reversible_while


def loop(c: jax.Array, n: jax.Array) -> jax.Array:
    def pred(s: tuple[jax.Array, ...], caps: tuple[jax.Array, ...]) -> jax.Array:
        return s[1] < caps[1]

    def step(s: tuple[jax.Array, ...], caps: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        x, i = s
        return jnp.sin(x) * caps[0] + 0.1, i + 1

    x0 = jnp.linspace(-1.0, 1.0, 4096, dtype=jnp.float32)
    x, _ = reversible_while(pred, step, (x0, jnp.asarray(0, np.int64)), (c, n))
    return jnp.sum(x)


def median_us(fn: object, *args: object) -> float:
    jax.block_until_ready(fn(*args))  # (compiled)
    times = []
    for _ in range(7):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [10, 100, 1000, 10000]
    forward = jax.jit(loop)
    backward = jax.jit(jax.grad(loop))
    c = jnp.float32(0.9)
    # (the cost of a call with no iteration, taken off the per-iteration figures)
    f0 = median_us(forward, c, jnp.asarray(0, np.int64))
    g0 = median_us(backward, c, jnp.asarray(0, np.int64))
    print(f"n = 0: forward {f0:.0f} us, gradient {g0:.0f} us\n")
    print("| n | forward (us) | gradient (us) | forward per iteration (us) | "
          "gradient per iteration (us) | gradient / forward, per iteration |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        f = median_us(forward, c, jnp.asarray(n, np.int64))
        g = median_us(backward, c, jnp.asarray(n, np.int64))
        fi, gi = (f - f0) / n, (g - g0) / n
        print(f"| {n} | {f:.0f} | {g:.0f} | {fi:.2f} | {gi:.2f} | {gi / fi:.1f} |")


if __name__ == "__main__":
    main()
