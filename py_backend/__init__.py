"""nx_jax Python worker: runs Elixir Nx ``defn`` graphs on JAX behind an Erlang Port.

Layers (one module each): :mod:`channel` (framing, ETF codec), :mod:`graph` (decode and validate),
:mod:`lower` (graph -> JAX), :mod:`cache` (compiled executables), :mod:`worker` (the loop).
"""

PROTOCOL_VERSION = 1
