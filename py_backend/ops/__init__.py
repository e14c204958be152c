"""The ops, one module per family (``leaves``, ``elementwise``, ``reductions``, ``shape``,
``indexing``, ``linalg``, ``grad``, ``control_flow``), as JAX declares a primitive's rules beside
it: each module holds its ops' registrations (arity, options, the value of an option a version-1
client may leave out), their structural checks (run when a graph is decoded), their lowerings
(run when it is traced) and their Nx-exact rules, and ends with its ``OPS``
(:mod:`py_backend.ops.rules`). :mod:`py_backend.registry` collects them.
"""
