defmodule NxJax.WorkerError do
  @moduledoc """
  Raised when the Python worker answers a request with an error, exits, or does not answer in
  time.

  `class` is the Python exception class (`"GraphError"`, `"ZeroDivisionError"`, ...) or one of
  `"WorkerExited"` / `"Timeout"` for failures of the worker process itself; `message` and
  `traceback` are the worker's text.
  """
  defexception [:class, :message, traceback: ""]

  @impl true
  def message(%__MODULE__{class: class, message: message, traceback: traceback}) do
    base = "#{class}: #{message}"

    case traceback do
      "" -> base
      nil -> base
      tb -> base <> "\n\nPython traceback:\n" <> tb
    end
  end
end
