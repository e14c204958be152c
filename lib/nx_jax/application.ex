defmodule NxJax.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
    NxJax.Pool.reload_config()

    children =
      if Application.get_env(:nx_jax, :start_worker, true) do
        [NxJax.Distribution, NxJax.Pool]
      else
        [NxJax.Distribution]
      end

    Supervisor.start_link(children, strategy: :one_for_one, name: NxJax.Supervisor)
  end
end
