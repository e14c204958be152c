# A setting of an application environment (:nx_jax's unless another is named) for one test:
# put back as it was when the test ends (compiled with the project in the test environment,
# mix.exs).
defmodule NxJax.TestAppEnv do
  @moduledoc false

  def put(key, value, app \\ :nx_jax) do
    old = Application.fetch_env(app, key)
    Application.put_env(app, key, value)

    ExUnit.Callbacks.on_exit(fn ->
      case old do
        {:ok, previous} -> Application.put_env(app, key, previous)
        :error -> Application.delete_env(app, key)
      end
    end)
  end
end
