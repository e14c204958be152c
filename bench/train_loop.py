"""The Python twins of bench/train_loop.exs, jitted in-process in JAX.

    python bench/train_loop.py mlp STEPS     the Adam step of a 784-128-10 MLP, state on the
                                             device, the loss read back after every step
    python bench/train_loop.py chain CALLS   750 element-wise ops on 2 f32 values, read back
    python bench/train_loop.py serve         the MLP step, in blocks: for each line ``N`` read
                                             from stdin it runs N more steps and prints one
                                             line, ``{"step_us": [...], "losses": [...]}``
                                             (every 100th step's loss), until stdin ends
                                             (bench/train_step.exs alternates these blocks
                                             with its own, so both run in the same minutes)

Prints one JSON object: ``step_us`` (each step's or call's time in microseconds, the read-back
included), ``losses`` (every 100th loss, to compare with the Elixir run) and ``cpu_us`` (this
process's CPU time per step). It runs with JAX's own settings, as a user's script would, in
the environment it is given (the worker's XLA settings are JAX's defaults unless the pool's
``worker_env`` says otherwise).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "mlp"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 500

    import jax

    jax.config.update("jax_enable_x64", True)
    if mode == "serve":
        serve()
        return
    run = {"mlp": mlp, "chain": chain}[mode]
    step_us, losses, cpu_s = run(steps)
    print(json.dumps({"step_us": step_us, "losses": losses, "cpu_us": cpu_s / steps * 1e6}))


def mlp(steps: int) -> tuple[list[float], list[float], float]:
    blocks = mlp_blocks()
    cpu0 = time.process_time()
    step_us, losses = blocks(steps)
    return step_us, losses, time.process_time() - cpu0


def serve() -> None:
    """The ``serve`` mode: blocks of steps on request (see the module's doc)."""
    blocks = mlp_blocks()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        step_us, losses = blocks(int(line))
        print(json.dumps({"step_us": step_us, "losses": losses}), flush=True)


def mlp_blocks() -> Any:
    """The MLP's state and its jitted step, compiled and warmed: a function that runs N more
    steps from where the last call stopped and gives their times (us) and every 100th loss."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    b1, b2, lr, eps = 0.9, 0.999, 1.0e-3, 1.0e-8

    def loss_fn(params, x, y):  # type: ignore[no-untyped-def]
        w1, c1, w2, c2 = params
        h = jnp.maximum(x @ w1 + c1, 0.0)
        logits = h @ w2 + c2
        shifted = logits - jnp.max(logits, axis=1, keepdims=True)
        logp = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=1, keepdims=True))
        return -jnp.mean(jnp.sum(y * logp, axis=1))

    @jax.jit
    def step(state, x, y):  # type: ignore[no-untyped-def]
        params, m, v, t = state
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        t = t + 1
        m = tuple(b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g, strict=True))
        v = tuple(b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, g, strict=True))
        tf = t.astype(jnp.float32)
        mhat = tuple(mi / (1 - b1**tf) for mi in m)
        vhat = tuple(vi / (1 - b2**tf) for vi in v)
        params = tuple(p - lr * mh / (jnp.sqrt(vh) + eps)
                       for p, mh, vh in zip(params, mhat, vhat, strict=True))
        return (params, m, v, t), loss

    state, batches = initial(np)
    state = jax.device_put(state)
    batches = [jax.device_put(b) for b in batches]
    for i in range(20):  # (the first steps compile: not counted, as in the Elixir run)
        x, y = batches[i % 4]
        state, loss = step(state, x, y)
        float(loss)
    done = 0

    def run(steps: int) -> tuple[list[float], list[float]]:
        nonlocal state, done
        step_us: list[float] = []
        losses: list[float] = []
        for i in range(done + 1, done + steps + 1):
            x, y = batches[i % 4]
            t0 = time.perf_counter_ns()
            state, loss = step(state, x, y)
            value = float(loss)
            step_us.append((time.perf_counter_ns() - t0) / 1000)
            if i % 100 == 0:
                losses.append(value)
        done += steps
        return step_us, losses

    return run


def chain(calls: int) -> tuple[list[float], list[float], float]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def f(x):  # type: ignore[no-untyped-def]
        for _ in range(250):
            x = jnp.sin(x * jnp.float32(1.0001) + jnp.float32(0.5))
        return x

    x = np.array([0.25, 0.75], np.float32)
    for _ in range(50):
        np.asarray(f(x))
    times = []
    cpu0 = time.process_time()
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        np.asarray(f(x))
        times.append((time.perf_counter_ns() - t0) / 1000)
    return times, [], time.process_time() - cpu0


def initial(np: Any) -> Any:
    """The state and 4 batches, from the formulas bench/train_loop.exs uses."""
    def grid(rows: int, cols: int, mod: int, scale: float):  # type: ignore[no-untyped-def]
        i = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
        return ((i % mod - mod // 2) * scale).astype(np.float32)

    w1 = grid(784, 128, 13, 0.01)
    w2 = grid(128, 10, 7, 0.05)
    params = (w1, np.zeros(128, np.float32), w2, np.zeros(10, np.float32))
    zeros = tuple(np.zeros_like(p) for p in params)
    state = (params, zeros, zeros, np.int32(0))
    batches = []
    for b in range(4):
        x = ((np.arange(128 * 784, dtype=np.int64).reshape(128, 784) * (b + 3)) % 255
             ).astype(np.float32) / 255
        labels = (np.arange(128) * (b + 1)) % 10
        y = np.eye(10, dtype=np.float32)[labels]
        batches.append((x, y))
    return state, batches


if __name__ == "__main__":
    main()
