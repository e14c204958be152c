defmodule NxJax.TestPool do
  @moduledoc false
  # For test modules (async: false) that need a pool of their own: replaces the application's
  # pool with one of `size` workers until the module's tests are done, then restores it.
  import ExUnit.Callbacks, only: [on_exit: 1]

  def replace_application_pool(size) do
    :ok = Supervisor.terminate_child(NxJax.Supervisor, NxJax.Pool)
    {:ok, pool} = NxJax.Pool.start_link(size: size)
    Process.unlink(pool)

    on_exit(fn ->
      Supervisor.stop(pool)
      {:ok, _} = Supervisor.restart_child(NxJax.Supervisor, NxJax.Pool)
    end)

    :ok
  end
end

ExUnit.start()
