import Config

# nx_jax's own test suites (and Nx's test files, `make nx-suite`) compare results with the
# numbers Nx 0.7.2 prints: they run in the numerics mode that rounds as Nx's binary backend
# does. A project that depends on nx_jax does not read this file; its default is :native
# (NxJax.Worker.Server.default_numerics/0).
if config_env() in [:test, :nx_suite] do
  config :nx_jax, numerics: :nx
end
