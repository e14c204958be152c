"""nx_jax Python worker: runs Elixir Nx ``defn`` graphs on JAX behind an Erlang Port.

Layers, each importing only those before it: :mod:`channel` (framing, ETF codec),
:mod:`wire_graph` (the graph's data model, decoded and validated against a registry),
:mod:`lower` (the lowering driver: graph -> JAX, each node by its op's rule), :mod:`ops` (one
module per op family: each op's registration, check, lowering and Nx-exact rule),
:mod:`registry` (the ops of every family), :mod:`program` (decode and lower against the
registry), :mod:`cache` (compiled executables), :mod:`worker` (the loop).
:mod:`numerics` says how floats are rounded (Nx's way or XLA's), :mod:`nx_rules` holds the
element-wise functions and derivatives of Nx's way, :mod:`complex_math` the complex functions
XLA has no kernel for and complex products as Nx computes them.
"""

from py_backend import numerics

# before anything imports JAX: XLA reads its flags when it creates the CPU client
numerics.apply_xla_flags()

PROTOCOL_VERSION = 1
