"""nx_jax Python worker: runs Elixir Nx ``defn`` graphs on JAX behind an Erlang Port.

Layers (one module each): :mod:`channel` (framing, ETF codec), :mod:`graph` (decode and validate),
:mod:`lower` (graph -> JAX), :mod:`cache` (compiled executables), :mod:`worker` (the loop).
:mod:`numerics` says how floats are rounded (Nx's way or XLA's), :mod:`nx_rules` holds the
element-wise functions and derivatives of Nx's way, :mod:`complex_math` the complex functions
XLA has no kernel for and complex products as Nx computes them.
"""

from py_backend import numerics

# before anything imports JAX: XLA reads its flags when it creates the CPU client
numerics.apply_xla_flags()

PROTOCOL_VERSION = 1
