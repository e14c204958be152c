"""Which platform and device this worker computes on: ``NX_JAX_PLATFORM`` (a JAX platform
name: ``cpu``, ``cuda``, ``rocm``, ``tpu``, ...) and ``NX_JAX_DEVICE`` (an index among that
platform's devices), set by the Elixir side from ``config :nx_jax, platform:, device:``
(``NxJax.Devices``). The chosen device becomes JAX's default device. A platform or device JAX
does not have is a refusal (the worker answers ``WorkerMismatch``, as for a failed handshake)
that lists what JAX reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax


def available() -> str:
    """What JAX reports here: each platform with its devices."""
    by_platform: dict[str, list[str]] = {}
    for device in jax.devices():
        by_platform.setdefault(device.platform, []).append(str(device))
    return "; ".join(f"{p}: {', '.join(ds)}" for p, ds in by_platform.items())


def choose(env: Mapping[str, str]) -> tuple[Any | None, str | None]:
    """``(device, None)`` for the device asked for (``None`` when nothing is asked), or
    ``(None, why)`` when there is no such platform or device."""
    platform = env.get("NX_JAX_PLATFORM") or None
    index_text = env.get("NX_JAX_DEVICE")
    if platform is None and index_text is None:
        return None, None
    try:
        devices = jax.devices(platform)
    except RuntimeError as exc:
        return None, (f"JAX has no platform {platform!r} here ({str(exc).splitlines()[0]}); "
                      f"it reports {available()}. Install the platform's JAX (for NVIDIA GPUs "
                      "`pip install -e '.[cuda12]'`) or set config :nx_jax, platform: to one "
                      "of those")
    index = 0
    if index_text is not None:
        if not index_text.isdigit():
            return None, f"NX_JAX_DEVICE must be a device index, got {index_text!r}"
        index = int(index_text)
    if index >= len(devices):
        return None, (f"device {index} of platform {devices[0].platform!r} does not exist: JAX "
                      f"reports {len(devices)} ({', '.join(str(d) for d in devices)})")
    return devices[index], None


def apply(env: Mapping[str, str]) -> tuple[Any | None, str | None]:
    """:func:`choose`, and make the device JAX's default."""
    device, why = choose(env)
    if device is not None:
        jax.config.update("jax_default_device", device)
    return device, why
