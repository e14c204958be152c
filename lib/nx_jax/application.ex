defmodule NxJax.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
    # (raises saying what to do when the NIF is missing: resident tensors are freed through it)
    NxJax.Guard.load!()
    NxJax.Pool.reload_config()

    children =
      if Application.get_env(:nx_jax, :start_worker, true) do
        [NxJax.TraceCache, NxJax.Worker.Collector, NxJax.Distribution, NxJax.Pool]
      else
        [NxJax.TraceCache, NxJax.Worker.Collector, NxJax.Distribution]
      end

    Supervisor.start_link(children, strategy: :one_for_one, name: NxJax.Supervisor)
  end
end
