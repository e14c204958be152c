"""Complex functions without an XLA kernel and complex products (py_backend/complex_math.py).
The expected values are real Nx 0.7.2's, or NumPy's on doubles where Nx computes on doubles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from py_backend import complex_math, lower  # noqa: F401 (lower turns on JAX's x64 mode)

INF = np.inf
RNG = np.random.default_rng(3)


def c64(*values: complex) -> np.ndarray:
    return np.array(values, np.complex64)


def test_cbrt_is_the_principal_root_with_nx_values() -> None:
    z = c64(2 + 3j, -8 + 0j, 0j, -1 - 1j, complex(INF, 3))
    got = np.asarray(jax.jit(complex_math.cbrt)(z))
    want = c64(
        complex(1.4518566131591797, 0.49340352416038513),
        complex(1.0, 1.7320507764816284),
        0j,
        complex(0.7937005162239075, -0.7937005162239075),
        complex(INF, 0.0),  # a zero angle: no Inf * 0 in the imaginary part
    )
    assert np.array_equal(got, want)


def test_cbrt_derivative_is_nx_formula() -> None:
    z = np.complex128(2 + 3j)
    _, tangent = jax.jvp(complex_math.cbrt, (z,), (np.complex128(1.0),))
    y = z ** (1 / 3)
    assert np.isclose(complex(tangent), 1 / (3 * y * y))


def test_atan2_of_real_valued_complex_and_nan_elsewhere() -> None:
    atan2 = complex_math.real_atan2(jax.lax.atan2)
    got = np.asarray(atan2(c64(7 + 0j, 1 + 0j, 2 + 1j), c64(2 + 0j, 1 + 0j, 1 + 0j)))
    want = c64(complex(1.292496681213379, 0.0), complex(0.7853981852531433, 0))
    assert np.array_equal(got[:2], want)
    assert np.isnan(got[2].real) and np.isnan(got[2].imag)
    # real tensors are the real function's
    assert np.asarray(atan2(np.float32(1.0), np.float32(1.0))) == np.float32(np.pi / 4)


@pytest.mark.parametrize("axes,keep", [(None, False), ((0,), False), ((2,), True), ((0, 2), False)])
def test_product_over_axes(axes: tuple[int, ...] | None, keep: bool) -> None:
    x = (RNG.standard_normal((3, 2, 5)) + 1j * RNG.standard_normal((3, 2, 5)))
    x = x.astype(np.complex64)
    got = np.asarray(complex_math.product(jnp.asarray(x), axes, keep))
    want = np.prod(x.astype(np.complex128), axis=axes, keepdims=keep)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-5)


def test_product_values_as_nx() -> None:
    def total(*values: complex) -> complex:
        return complex(complex_math.product(jnp.asarray(c64(*values)), None, False))

    assert total(complex(INF, 3), -2 + 4j) == complex(-INF, INF)
    assert total(1 + 0j, complex(INF, 0)) == complex(INF, 0)
    empty = complex_math.product(jnp.zeros((3, 0), jnp.complex64), (1,), False)
    assert np.array_equal(np.asarray(empty), np.ones(3, np.complex64))
    odd = c64(1 + 1j, 2 - 1j, 0.5 + 0j, -1 + 3j, 2 + 2j)
    got = complex(complex_math.product(jnp.asarray(odd), None, False))
    assert np.isclose(got, np.prod(odd.astype(np.complex128)))


def test_cumulative_product_and_the_window_monoid() -> None:
    def running(reverse: bool, *values: complex) -> np.ndarray:
        return np.asarray(complex_math.cumulative_product(jnp.asarray(c64(*values)), 0, reverse))

    got = running(False, complex(INF, 3), -2 + 4j)
    assert np.array_equal(got, c64(complex(INF, 3), complex(-INF, INF)))
    rev = running(True, 1 + 1j, 2 + 0j, 3 - 1j)
    assert np.allclose(rev, c64((1 + 1j) * 2 * (3 - 1j), 2 * (3 - 1j), 3 - 1j))
    one, z = jnp.asarray(c64(1 + 0j)), jnp.asarray(c64(complex(INF, 3)))
    assert np.array_equal(np.asarray(complex_math.times_skipping_one(one, z)), z)
    assert np.array_equal(np.asarray(complex_math.times_skipping_one(z, one)), z)
