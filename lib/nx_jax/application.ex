defmodule NxJax.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
    # (raises saying what to do when the NIF is missing: resident tensors are freed through it)
    NxJax.Guard.load!()
    NxJax.Pool.reload_config()

    # (the compiler under real Nx keeps its traces in NxJax.TraceCache; under the clean room
    # the front end keeps them, and the module is not built)
    traces = if Code.ensure_loaded?(NxJax.TraceCache), do: [NxJax.TraceCache], else: []
    workers = if Application.get_env(:nx_jax, :start_worker, true), do: [NxJax.Pool], else: []
    children = traces ++ [NxJax.Worker.Collector, NxJax.Distribution] ++ workers

    Supervisor.start_link(children, strategy: :one_for_one, name: NxJax.Supervisor)
  end
end
