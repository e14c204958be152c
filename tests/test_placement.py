"""py_backend/placement.py: the platform and device a worker computes on, and the refusals."""

from __future__ import annotations

import jax

from py_backend import placement


def test_nothing_asked_is_nothing_chosen() -> None:
    assert placement.choose({}) == (None, None)


def test_the_cpu_device_by_platform_and_index() -> None:
    device, why = placement.choose({"NX_JAX_PLATFORM": "cpu", "NX_JAX_DEVICE": "0"})
    assert why is None and device == jax.devices("cpu")[0]
    assert placement.choose({"NX_JAX_DEVICE": "0"}) == (jax.devices()[0], None)


def test_a_platform_or_device_jax_lacks_is_a_refusal_listing_what_it_has() -> None:
    device, why = placement.choose({"NX_JAX_PLATFORM": "cuda"})
    assert device is None and why is not None
    assert why.startswith("JAX has no platform 'cuda' here")
    assert f"it reports {placement.available()}" in why
    assert placement.available() == "cpu: " + ", ".join(str(d) for d in jax.devices("cpu"))
    device, why = placement.choose({"NX_JAX_DEVICE": "9"})
    assert device is None and why is not None and "device 9 of platform 'cpu' does not exist" in why
    assert placement.choose({"NX_JAX_DEVICE": "first"})[1] == (
        "NX_JAX_DEVICE must be a device index, got 'first'")
