"""JAX's values for the toolbox tests under real Nx (test_real_nx/toolbox_test.exs).

Each function below is the JAX twin of a function of that test file (the same equations,
solvers and points); the test asserts the values printed here. Run with the project's
environment and paste what changed:

    .venv/bin/python tools/toolbox_reference.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)

F64 = jnp.float64


def newton_sqrt(a: jax.Array) -> jax.Array:
    """sqrt(a) as the root of x^2 - a, Newton's steps in an unbounded while loop."""

    def solve(f: Callable[[jax.Array], jax.Array], x0: jax.Array) -> jax.Array:
        def cond(state: tuple[jax.Array, jax.Array]) -> jax.Array:
            x, i = state
            return jnp.logical_and(i < 100, jnp.abs(f(x)) > 1.0e-12)

        def body(state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            x, i = state
            return x - f(x) / (2 * x), i + 1

        return lax.while_loop(cond, body, (x0, jnp.asarray(0)))[0]

    return lax.custom_root(lambda x: x * x - a, jnp.ones_like(a), solve, lambda g, y: y / g(1.0))


def cubic_root(a: jax.Array) -> jax.Array:
    """x with x^3 + a x - 1 = 0: df/da = x depends on x (a second derivative sees it move)."""

    def solve(f: Callable[[jax.Array], jax.Array], x0: jax.Array) -> jax.Array:
        x = x0
        for _ in range(40):
            x = x - f(x) / (3 * x * x + a)
        return x

    return lax.custom_root(
        lambda x: x**3 + a * x - 1.0, jnp.ones_like(a), solve, lambda g, y: y / g(1.0)
    )


K = jnp.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.2, 0.0, 1.0]], dtype=F64)
M = jnp.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.3, 0.0, 1.0]], dtype=F64)


def coupled_root(p: jax.Array) -> jax.Array:
    """x with K x + 0.1 x^3 = M p: a non-symmetric Jacobian K + diag(0.3 x^2)."""

    def f(x: jax.Array) -> jax.Array:
        return K @ x + 0.1 * x**3 - M @ p

    def solve(f: Callable[[jax.Array], jax.Array], x0: jax.Array) -> jax.Array:
        x = x0
        for _ in range(30):
            x = x - jnp.linalg.solve(K + jnp.diag(0.3 * x * x), f(x))
        return x

    def tangent_solve(g: Callable[[jax.Array], jax.Array], y: jax.Array) -> jax.Array:
        columns = [g(jnp.eye(3, dtype=y.dtype)[i]) for i in range(3)]
        return jnp.linalg.solve(jnp.stack(columns, axis=1), y)

    return lax.custom_root(f, jnp.zeros_like(p), solve, tangent_solve)


A_SYM = jnp.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]], dtype=F64)
A_GEN = jnp.array([[3.0, 1.0, 0.0], [0.5, 2.0, 0.2], [0.1, 0.4, 4.0]], dtype=F64)
B = jnp.array([1.0, -2.0, 0.5], dtype=F64)


def dense_solve(linear: Callable[[jax.Array], jax.Array], b: jax.Array) -> jax.Array:
    columns = [linear(jnp.eye(3, dtype=b.dtype)[i]) for i in range(3)]
    return jnp.linalg.solve(jnp.stack(columns, axis=1), b)


def general_loss(a: jax.Array, b: jax.Array) -> jax.Array:
    x = lax.custom_linear_solve(lambda v: a @ v, b, dense_solve, dense_solve)
    return jnp.sum(jnp.sin(x))


def sin_times(x: jax.Array, y: jax.Array) -> jax.Array:
    """JAX's custom_jvp example: sin(x) y with the rule cos(x) x_dot y + sin(x) y_dot."""

    @jax.custom_jvp
    def f(x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), jnp.cos(x) * tx * y + jnp.sin(x) * ty

    return f(x, y)


def r3_to_r2(x: jax.Array) -> jax.Array:
    return jnp.stack([x[0] * jnp.sin(x[1]), x[0] ** 2 + x[1] * jnp.exp(x[2])])


def show(name: str, value: Any) -> None:
    print(f"{name}: {jax.tree_util.tree_map(lambda v: jnp.asarray(v).tolist(), value)}")


def main() -> None:
    a = jnp.asarray(2.0, F64)
    show("newton_sqrt grad at 2.0", jax.grad(newton_sqrt)(a))
    show("newton_sqrt second derivative at 2.0", jax.grad(jax.grad(newton_sqrt))(a))

    show("cubic_root at 2.0", cubic_root(a))
    show("cubic_root grad at 2.0", jax.grad(cubic_root)(a))
    show("cubic_root second derivative at 2.0", jax.grad(jax.grad(cubic_root))(a))

    p = jnp.array([0.5, -1.0, 2.0], dtype=F64)
    show("coupled_root at p", coupled_root(p))
    show("jacrev coupled_root at p", jax.jacrev(coupled_root)(p))

    show("general_loss grads (a, b)", jax.grad(general_loss, argnums=(0, 1))(A_GEN, B))
    show("general_loss hessian in b", jax.hessian(general_loss, argnums=1)(A_GEN, B))

    def shifted(s: jax.Array) -> jax.Array:
        return general_loss(A_GEN + s * jnp.eye(3, dtype=F64), B)

    s0 = jnp.asarray(0.0, F64)
    show("general_loss(a + s I, b): second derivative in s at 0", jax.grad(jax.grad(shifted))(s0))
    show("sym_loss grads (a, b)", jax.grad(general_loss, argnums=(0, 1))(A_SYM, B))

    x, y = jnp.asarray(2.0, F64), jnp.asarray(3.0, F64)
    show("sin_times grads at (2, 3)", jax.grad(sin_times, argnums=(0, 1))(x, y))
    show("sin_times grad of grad in x", jax.grad(jax.grad(sin_times))(x, y))

    x3 = jnp.array([0.5, -1.25, 0.75], dtype=F64)
    t3 = jnp.array([1.0, 0.5, -2.0], dtype=F64)
    show("jvp r3_to_r2", jax.jvp(r3_to_r2, (x3,), (t3,))[1])
    show("jacfwd r3_to_r2", jax.jacfwd(r3_to_r2)(x3))
    show("hessian sum(r3_to_r2)", jax.hessian(lambda x: jnp.sum(r3_to_r2(x)))(x3))


if __name__ == "__main__":
    main()
