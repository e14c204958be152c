"""In-process JAX baselines for bench/run.exs; prints one JSON object.

- ``scalar``: a jitted ``x * 2 + 1`` on a scalar f32, called with a NumPy scalar array and the
  result read back with ``np.asarray`` (what our worker does per call), in microseconds
  (``scalar_samples`` lists each call's time).
- ``mlp``: one SGD step of the bench MLP (x 64x256, w1 256x256, w2 256x1, tanh, mean squared
  error, learning rate 0.01), jitted, weights staying on the device, in microseconds
  (``n // 4`` steps; ``mlp_samples`` lists each step's time).
"""

from __future__ import annotations

import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)


def percentiles(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {"p50": samples[len(samples) // 2], "p99": samples[int(len(samples) * 0.99)]}


def time_calls(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    for _ in range(50):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1000)
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    f = jax.jit(lambda x: x * 2 + 1)
    x = np.float32(1.5)
    scalar_samples = time_calls(lambda: np.asarray(f(np.asarray(x))), n)
    scalar = percentiles(scalar_samples)

    def loss(params, x, y):  # type: ignore[no-untyped-def]
        w1, w2 = params
        pred = jnp.tanh(x @ w1) @ w2
        return jnp.mean((pred - y) ** 2)

    @jax.jit
    def step(params, x, y):  # type: ignore[no-untyped-def]
        g1, g2 = jax.grad(loss)(params, x, y)
        return params[0] - 0.01 * g1, params[1] - 0.01 * g2

    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.standard_normal((64, 256), dtype=np.float32))
    ys = jnp.asarray(rng.standard_normal((64, 1), dtype=np.float32))
    state = {"p": (jnp.asarray(rng.standard_normal((256, 256), dtype=np.float32) * 0.05),
                   jnp.asarray(rng.standard_normal((256, 1), dtype=np.float32) * 0.05))}

    def one_step() -> None:
        state["p"] = step(state["p"], xs, ys)
        jax.block_until_ready(state["p"])

    mlp_samples = time_calls(one_step, n // 4)
    out = {"scalar": scalar, "mlp": percentiles(mlp_samples),
           "scalar_samples": [round(t, 2) for t in scalar_samples],
           "mlp_samples": [round(t, 2) for t in mlp_samples]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
