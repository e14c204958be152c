defmodule NxJax.Guard do
  @moduledoc """
  A reference whose garbage collection sends a message (a NIF resource, `c_src/nx_jax_guard.c`).

  The BEAM frees a term's memory without telling anyone; only a NIF resource has a destructor.
  `new/2` makes a guard that sends `message` to the local process `pid` when the last reference
  to it is gone: every process that held it (in a variable, a message, an ETS table, a
  persistent term) has garbage collected it or exited. `disarm/2` takes the message back before
  that, once: the first caller gets `true`, every other `false`, and the guard then sends
  nothing. A resident tensor (`NxJax.Backend`) holds one, whose message frees it on its worker.

  The library is built by `mix compile` (the project's `:nx_jax_guard` compiler, in `mix.exs`)
  into `priv/` and loaded when the application starts (`load!/0`); without it nx_jax does not
  start, rather than leak every resident tensor.
  """

  @library ~c"nx_jax_guard"

  @doc "Loads the NIF library; raises, saying what to do, when it cannot."
  def load! do
    path = :filename.join(:code.priv_dir(:nx_jax), @library)

    case :erlang.load_nif(path, 0) do
      :ok ->
        :ok

      {:error, {:reload, _}} ->
        :ok

      {:error, {reason, text}} ->
        raise RuntimeError,
              "nx_jax could not load its NIF library #{path}.so (#{reason}: #{text}). It frees " <>
                "resident tensors when their terms are garbage collected, and nx_jax does not " <>
                "run without it: run `mix compile` (it builds c_src/nx_jax_guard.c with cc and " <>
                "the erl_nif.h of this Erlang/OTP; on Debian `apt-get install erlang-dev gcc`)"
    end
  end

  @doc """
  Does nothing with `term`, after everything before it: a process that sent a resident
  tensor's handle in a request calls it on the tensor once the reply has come, so that the
  tensor (and its guard) cannot be garbage collected, and freed, while the request is on its
  way. (A call to another module is never optimised away, so the term stays live up to here.)
  """
  def keep(_term), do: :ok

  @doc "A guard that sends `message` to the local process `pid` when it is garbage collected."
  def new(_pid, _message), do: not_loaded()

  @doc """
  Takes the guard's message back (it will send nothing): `true` for the first call, `false`
  once disarmed or sent. `reason` (an atom) is what `status/1` says afterwards.
  """
  def disarm(_guard, _reason), do: not_loaded()

  @doc "`:armed`, or the reason the guard was disarmed with."
  def status(_guard), do: not_loaded()

  defp not_loaded, do: :erlang.nif_error(:nx_jax_guard_not_loaded)
end
