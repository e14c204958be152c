"""Nx types (PROTOCOL.md section 3) and their NumPy dtypes. No JAX, no ports.

    >>> to_dtype(NxType("f", 32))
    dtype('float32')

Type promotion is not here: the Elixir side decides every node's type (and the type a
comparison's inputs meet in) and sends it with the graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class NxType:
    kind: str  # "u", "s", "f", "bf" or "c" (complex: two floats of bits / 2)
    bits: int

    def __str__(self) -> str:
        return f"{{:{self.kind}, {self.bits}}}"

    @property
    def is_float(self) -> bool:
        return self.kind in ("f", "bf")

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("s", "u")


_DTYPES: dict[NxType, np.dtype] = {
    NxType("u", 8): np.dtype(np.uint8),
    NxType("u", 16): np.dtype(np.uint16),
    NxType("u", 32): np.dtype(np.uint32),
    NxType("u", 64): np.dtype(np.uint64),
    NxType("s", 8): np.dtype(np.int8),
    NxType("s", 16): np.dtype(np.int16),
    NxType("s", 32): np.dtype(np.int32),
    NxType("s", 64): np.dtype(np.int64),
    NxType("f", 16): np.dtype(np.float16),
    NxType("f", 32): np.dtype(np.float32),
    NxType("f", 64): np.dtype(np.float64),
    NxType("bf", 16): np.dtype(ml_dtypes.bfloat16),
    NxType("c", 64): np.dtype(np.complex64),
    NxType("c", 128): np.dtype(np.complex128),
}

SUPPORTED: frozenset[NxType] = frozenset(_DTYPES)

# Little-endian view of every dtype: the wire order (PROTOCOL.md section 2).
_WIRE: dict[NxType, np.dtype] = {t: d.newbyteorder("<") for t, d in _DTYPES.items()}


def to_dtype(t: NxType) -> np.dtype:
    return _DTYPES[t]


def wire_dtype(t: NxType) -> np.dtype:
    """The dtype of wire data (explicitly little-endian)."""
    return _WIRE[t]


def from_dtype(dtype: np.dtype) -> NxType:
    dtype = np.dtype(dtype)
    for t, d in _DTYPES.items():
        if d == dtype:
            return t
    raise ValueError(f"no Nx type for dtype {dtype}")
