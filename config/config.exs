import Config

# nx_jax's own test suites (and Nx's test files, `make nx-suite`) compare results with the
# numbers Nx 0.7.2 prints: they run in the numerics mode that rounds as Nx's binary backend
# does. A project that depends on nx_jax does not read this file; its default is :native
# (NxJax.Worker.Server.default_numerics/0).
if config_env() in [:test, :nx_suite] do
  config :nx_jax, numerics: :nx
end

# Built against real Nx 0.7.2 (NX_JAX_NX=DIR, read by mix.exs): `defn` runs on nx_jax there
# too, as a project that depends on nx_jax configures it (README, "With real Nx 0.7.2").
if System.get_env("NX_JAX_NX", "") not in ["", "clean"] do
  config :nx, default_defn_options: [compiler: NxJax]
end
