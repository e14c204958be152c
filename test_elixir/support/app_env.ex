# A setting of the :nx_jax application environment for one test: put back as it was when the
# test ends (compiled with the project in the test environment, mix.exs).
defmodule NxJax.TestAppEnv do
  @moduledoc false

  def put(key, value) do
    old = Application.fetch_env(:nx_jax, key)
    Application.put_env(:nx_jax, key, value)

    ExUnit.Callbacks.on_exit(fn ->
      case old do
        {:ok, previous} -> Application.put_env(:nx_jax, key, previous)
        :error -> Application.delete_env(:nx_jax, key)
      end
    end)
  end
end
