"""Complex types (c64, c128): fft/ifft along the last axis, real/imag/conjugate, and a few
element-wise ops on complex tensors.

Real inputs of fft/ifft become c64 (c128 from f64); `:length` pads the last axis with zeros
or truncates it. References: numpy.fft in complex128 (`n=length` pads and truncates the same
way), values from Nx's docs. Gradients (Elixir side, f64 inputs) differentiate the sum of the
real and imaginary parts of the complex result.
"""

from typing import Any

import numpy as np

from conformance.case import Case, case, number, tensor, wire

Z64 = tensor("c64", [1 + 2j, -0.5 + 0j, 0 - 1.5j, 2.25 + 0.75j])
Z128 = tensor("c128", [[1 - 1j, 0.5 + 2j, -3 + 0j], [0 + 0j, 1 + 1j, -2 - 0.5j]])
XF = tensor("f32", [1.0, 1.0, 0.0, 0.0])
XD = tensor("f64", [[0.5, -1.0, 2.0, 0.25, 1.5, -0.75], [1.0, 0.0, 0.0, 0.0, 2.0, 3.0]])
C64_FFT = (1e-6, 2e-6)  # sums of a few f32 products: absolute error of order n * eps


def _fft(n: int | None = None) -> Any:
    return lambda x: np.fft.fft(x, n=n, axis=-1)


def _ifft(n: int | None = None) -> Any:
    return lambda x: np.fft.ifft(x, n=n, axis=-1)


CASES: list[Case] = [
    # fft
    case("fft", [XF], out="c64", ref=_fft(), node=wire("fft", length=4), tol=C64_FFT),
    case("fft", [tensor("s64", [[1, 1, 0, 0, 2, 3], [1, 0, 0, 0, 2, 3]])], {"length": 4},
         out="c64", expected=[[2, 1 - 1j, 0, 1 + 1j], [1, 1, 1, 1]], node=wire("fft", length=4),
         tol=C64_FFT, source="Nx.fft docs"),
    case("fft", [XD], out="c128", ref=_fft(), node=wire("fft", length=6), grad=True),
    case("fft", [XD], {"length": 8}, out="c128", ref=_fft(8), node=wire("fft", length=8),
         grad=True),
    case("fft", [Z64], {"length": 3}, out="c64", ref=_fft(3), node=wire("fft", length=3),
         tol=C64_FFT),
    case("fft", [Z128], {"length": "power_of_two"}, out="c128", ref=_fft(4),
         node=wire("fft", length=4)),
    # ifft
    case("ifft", [tensor("c64", [2, 1 - 1j, 0, 1 + 1j])], out="c64", expected=[1, 1, 0, 0],
         node=wire("ifft", length=4), tol=C64_FFT, source="Nx.ifft docs"),
    case("ifft", [tensor("s64", [4, 0, 0, 0, 0, 0])], {"length": 4}, out="c64",
         expected=[1, 1, 1, 1], node=wire("ifft", length=4), tol=C64_FFT,
         source="Nx.ifft docs"),
    case("ifft", [XD], {"length": 5}, out="c128", ref=_ifft(5), node=wire("ifft", length=5),
         grad=True),
    case("ifft", [Z128], out="c128", ref=_ifft(), node=wire("ifft", length=3)),
    case("ifft", [XF], out="c64", ref=_ifft(), node=wire("ifft", length=4), tol=C64_FFT),
    # real, imag, conjugate
    case("real", [Z64], out="f32", ref=np.real, node=wire("real")),
    case("real", [Z128], out="f64", ref=np.real, node=wire("real")),
    case("real", [XD], out="f64", ref=np.real, node=wire("real"), grad=True),
    case("imag", [Z64], out="f32", ref=np.imag, node=wire("imag")),
    case("imag", [Z128], out="f64", ref=np.imag, node=wire("imag")),
    case("imag", [tensor("s64", [1, -2])], out="f32", expected=[0.0, 0.0], node=wire("imag"),
         source="the imaginary part of a real number is 0"),
    case("imag", [XD], out="f64", ref=np.imag, node=wire("imag"), grad=True),
    case("conjugate", [Z64], out="c64", ref=np.conjugate, node=wire("conjugate")),
    case("conjugate", [Z128], out="c128", ref=np.conjugate, node=wire("conjugate")),
    case("conjugate", [XD], out="c128", ref=np.conjugate, node=wire("conjugate"), grad=True),
    case("conjugate", [tensor("s64", [3, -1])], out="c64", expected=[3, -1],
         node=wire("conjugate"), source="Nx.conjugate: real inputs become complex"),
    # element-wise ops with complex operands
    case("add", [Z64, tensor("f32", 1.5)], out="c64", ref=np.add, node=wire("add")),
    case("multiply", [Z128, tensor("f64", [2.0, -1.0, 0.5])], out="c128", ref=np.multiply,
         node=wire("multiply")),
    case("subtract", [Z64, number(1, "c64")], out="c64", ref=np.subtract, node=wire("subtract"),
         name="subtract(c64[4], 1) -> c64"),
    case("divide", [Z128, tensor("c128", [1 + 1j, 2 + 0j, 0 - 1j])], out="c128",
         ref=np.divide, node=wire("divide")),
    case("abs", [Z64], out="f32", ref=np.abs, node=wire("abs")),
    case("abs", [Z128], out="f64", ref=np.abs, node=wire("abs")),
    case("exp", [Z128], out="c128", ref=np.exp, node=wire("exp")),
    case("negate", [Z64], out="c64", ref=np.negative, node=wire("negate")),
    case("sum", [Z128], {"axes": [1]}, out="c128", ref=lambda z: z.sum(axis=1),
         node=wire("sum", axes=[1], keep_axes=False)),
    case("equal", [Z64, tensor("c64", [1 + 2j, 0.5, -1.5j, 2.25 + 0.75j])], out="u8",
         ref=np.equal, node=wire("equal", operand_type=("c", 64))),
]
