defmodule NxJax.WorkerError do
  @moduledoc """
  Raised when the Python worker answers a request with an error, exits, or does not answer in
  time.

  `class` is the Python exception class (`"GraphError"`, `"ZeroDivisionError"`, ...) or, for
  failures of the worker process itself, one of `"WorkerExited"` (the worker exited before it
  ran the call: retried once on the restarted worker unless `retry: false`), `"WorkerDied"`
  (a signal killed the worker while it ran this very call, which may be the cause: not
  retried), `"Timeout"`, `"FrameTooLarge"` and `"BadReply"` (the reply could not be decoded:
  malformed, or naming an atom this node does not have, `NxJax.Wire.decode_reply/1`); `message`
  and `traceback` are the worker's text.
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

  @doc false
  # the message of a worker whose Python process exited with `status`
  def exited_text(os_pid, status),
    do: "the Python worker (OS pid #{os_pid}) exited with status #{describe(status)}"

  @doc false
  # The error of a call whose worker exited with `status` (message `text`): "WorkerDied",
  # which nothing retries, for the call it was `running` when a signal killed it (that call may
  # be what killed it); "WorkerExited" otherwise.
  def exit_error(text, status, running) when running and status > 128 do
    {"WorkerDied",
     text <>
       " while running this call. It is not retried: the call itself may be what killed the " <>
       "worker (memory, a crash in native code); check the worker's log, and retry it " <>
       "yourself if it was not", ""}
  end

  def exit_error(text, _status, _running), do: {"WorkerExited", text, ""}

  @doc false
  # the message of a call past its deadline, whose worker is replaced
  def busy_text(timeout, os_pid) do
    "no reply from the worker within #{timeout} ms; the worker (OS pid #{os_pid}) " <>
      "was busy past the deadline and is replaced (raise :timeout for longer calls)"
  end

  defp describe(status) when status > 128,
    do: "#{status} (killed by signal #{status - 128})"

  defp describe(status), do: Integer.to_string(status)
end
