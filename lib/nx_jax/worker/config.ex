defmodule NxJax.Worker.Config do
  @moduledoc """
  The runtime's settings, each read in one place.

  - **A worker's** (`new/1`): read when the worker starts, from its start options and the
    application environment, into this struct, which its GenServer (`NxJax.Worker.Server`)
    holds. Callers get what they need of it (the frame limit) with the worker's shared state
    (`NxJax.Worker.Server`'s `:local` answer), asked once per process and worker.
  - **A call's** (`call/1`): the defaults of `:timeout` and `:reply_spin_us`, read when the
    application starts or by `NxJax.Pool.reload_config/0` (`load/0`), an application
    environment lookup on every call being a measurable part of a small call; a call's own
    options override them, resolved in `call/1` alone.

  Nothing here calls another runtime module but `NxJax.Worker.Sources` and
  `NxJax.Worker.Placement.env/1` (pure functions of the options).
  """

  # the worker polls for the next request this long after answering (docs/BENCHMARKS.md)
  @default_spin_us 100
  # the same for a caller awaiting its reply (NxJax.Worker.Caller)
  @default_reply_spin_us 100
  @default_timeout 60_000
  # {timeout, reply_spin_us} of a call that gives neither (load/0)
  @call_defaults {__MODULE__, :call}
  @header_max 4_294_967_295
  @numerics [:nx, :native]
  # The Elixir-side latency mechanisms that a worker's `:off` start option switches off, by
  # name, to measure what each is worth (`make bench-mechanisms`, docs/BENCHMARKS.md "Latency
  # mechanisms"); the worker's own are py_backend/request_loop.py's MECHANISMS (NX_JAX_OFF)
  @mechanisms [
    keeper: "the port rests with a suspended keeper, not the GenServer (NxJax.Worker.Keeper)",
    kept_alias: "a caller keeps its reply alias from call to call (NxJax.Worker.Caller)",
    poll_reductions: "each poll of a polling caller counts a time slice (NxJax.Worker.Caller)",
    late_replies: "a caller whose replies come late stops polling (NxJax.Worker.Caller)"
  ]

  @typedoc "A worker's settings."
  @type t :: %__MODULE__{
          python: String.t(),
          spin_us: non_neg_integer,
          lend_port: boolean,
          max_frame: pos_integer,
          env: [{charlist, charlist}],
          group: boolean,
          stdio_to: pid | nil,
          off: [atom]
        }

  @enforce_keys [:python, :spin_us, :lend_port, :max_frame, :env]
  defstruct [
    :python,
    :spin_us,
    :lend_port,
    :max_frame,
    :env,
    group: false,
    stdio_to: nil,
    off: []
  ]

  ## A worker's settings

  @doc """
  The settings of a worker started with `opts` (`NxJax.Worker.start_link/1`'s options):
  `:python` (`python_executable/1`), `:spin_us` (`spin_us/1`), `:lend_port` (default `config
  :nx_jax, lend_port: true`), `:max_frame` (`max_frame/1`), `:env` (the Python process's whole
  environment: the `:env` option over the handshake's expectations, the platform and device,
  the numerics mode and the byte settings), `:group`, `:stdio_to`, `:off` (`mechanisms_off/1`).
  Raises `ArgumentError` for a setting out of its range.
  """
  def new(opts) do
    max_frame = max_frame(opts)

    given_env =
      opts
      |> Keyword.get(:env, [])
      |> List.keystore("NX_JAX_MAX_FRAME", 0, {"NX_JAX_MAX_FRAME", Integer.to_string(max_frame)})

    # (the handshake's expectations first: an :env of the caller may override them, as tests do)
    env =
      Enum.reduce(
        NxJax.Worker.Sources.env() ++ NxJax.Worker.Placement.env(opts),
        given_env,
        fn {k, v}, acc ->
          if List.keymember?(acc, k, 0), do: acc, else: [{k, v} | acc]
        end
      )

    env =
      for {k, v} <-
            env
            |> numerics_env()
            |> bytes_env(:resident_gc_bytes, "NX_JAX_RESIDENT_GC_BYTES")
            |> bytes_env(:max_bytes, "NX_JAX_MAX_BYTES"),
          do: {to_charlist(k), to_charlist(v)}

    %__MODULE__{
      python: python_executable(opts),
      spin_us: spin_us(opts),
      lend_port:
        Keyword.get_lazy(opts, :lend_port, fn ->
          Application.get_env(:nx_jax, :lend_port, true)
        end),
      max_frame: max_frame,
      env: env,
      group: Keyword.get(opts, :group, false),
      stdio_to: Keyword.get(opts, :stdio_to),
      off: mechanisms_off(opts)
    }
  end

  @doc """
  The Elixir-side latency mechanisms that a worker started with `opts` and its callers go
  without: its `:off` option (internal, for `make bench-mechanisms`), a list of names of
  `mechanisms/0`; none by default. Raises `ArgumentError` for an unknown name.
  """
  def mechanisms_off(opts) do
    off = Keyword.get(opts, :off, [])
    known = Keyword.keys(@mechanisms)

    unless is_list(off) and Enum.all?(off, &(&1 in known)) do
      raise ArgumentError,
            "the worker option :off takes a list of latency mechanisms, of " <>
              "#{inspect(known)}, got: #{inspect(off)}"
    end

    Enum.uniq(off)
  end

  @doc "The Elixir-side latency mechanisms that `:off` can switch off, each with what it does."
  def mechanisms, do: @mechanisms

  @doc "How long a worker started with `opts` polls for the next request (`:spin_us`)."
  def spin_us(opts \\ []) do
    Keyword.get_lazy(opts, :spin_us, fn ->
      Application.get_env(:nx_jax, :spin_us, @default_spin_us)
    end)
  end

  @doc """
  The largest request frame, in bytes, a worker started with `opts` accepts: its `:env`'s
  `NX_JAX_MAX_FRAME` if it sets one, else `config :nx_jax, max_frame: bytes`, else a quarter
  of this machine's physical memory (at most #{@header_max}, the most a frame's 4-byte length
  can say).
  """
  def max_frame(opts \\ []) do
    env = Keyword.get(opts, :env, [])

    value =
      case List.keyfind(env, "NX_JAX_MAX_FRAME", 0) do
        {_, given} ->
          given |> to_string() |> Integer.parse() |> then(&(match?({_, ""}, &1) && elem(&1, 0)))

        nil ->
          Application.get_env(:nx_jax, :max_frame) || default_max_frame()
      end

    unless is_integer(value) and value > 0 and value <= @header_max do
      raise ArgumentError,
            "the worker's frame limit (config :nx_jax, max_frame: or NX_JAX_MAX_FRAME) must " <>
              "be an integer of bytes in 1..#{@header_max}, got: #{inspect(value)}"
    end

    value
  end

  # a quarter of MemTotal (Linux); the 4-byte length's range where that cannot be read
  defp default_max_frame do
    with {:ok, text} <- File.read("/proc/meminfo"),
         [_, kb] <- Regex.run(~r/^MemTotal:\s+(\d+) kB/m, text) do
      min(@header_max, max(div(String.to_integer(kb) * 1024, 4), 1_048_576))
    else
      _ -> @header_max
    end
  end

  @doc """
  The Python executable of a worker started with `opts`: the `:python` option, the `:python`
  key of the `:nx_jax` application environment, `NX_JAX_PYTHON`, the project's virtualenv,
  `python3` on the `PATH`.
  """
  def python_executable(opts \\ []) do
    venv = Path.join(NxJax.Worker.Sources.project_root(), ".venv/bin/python")

    Keyword.get(opts, :python) ||
      Application.get_env(:nx_jax, :python) ||
      System.get_env("NX_JAX_PYTHON") ||
      if(File.exists?(venv), do: venv) ||
      System.find_executable("python3") ||
      raise ArgumentError,
            "no Python found for the nx_jax worker: run `make deps` to create .venv, " <>
              "or set NX_JAX_PYTHON / config :nx_jax, python: \"/path/to/python\""
  end

  @doc """
  The numerics mode of a worker whose `:env` says none: `config :nx_jax, numerics:`, else the
  node's `NX_JAX_NUMERICS`, else `:native` (XLA's own f32 math, as EXLA computes; `:nx`
  rounds as Nx's binary backend does, bit for bit, and costs element-wise code several times
  as much: docs/BENCHMARKS.md section 12). This project's own test suites run in `:nx`
  (config/config.exs), as they compare with the numbers Nx 0.7.2 prints.
  """
  def default_numerics do
    numerics = Application.get_env(:nx_jax, :numerics) || node_numerics()

    unless numerics in @numerics do
      raise ArgumentError,
            "config :nx_jax, numerics: must be one of #{inspect(@numerics)}, got: " <>
              inspect(numerics)
    end

    numerics
  end

  defp node_numerics do
    case System.get_env("NX_JAX_NUMERICS") do
      nil -> :native
      "nx" -> :nx
      "native" -> :native
      other -> other
    end
  end

  # `default_numerics/0` as the worker's NX_JAX_NUMERICS (py_backend/numerics.py), unless its
  # own `:env` sets it
  defp numerics_env(env) do
    if List.keymember?(env, "NX_JAX_NUMERICS", 0) do
      env
    else
      [{"NX_JAX_NUMERICS", Atom.to_string(default_numerics())} | env]
    end
  end

  # `config :nx_jax, <key>:`, a number of bytes, as the worker's variable `var` (the worker's
  # default when unset), unless its own `:env` sets it: `resident_gc_bytes:` as
  # NX_JAX_RESIDENT_GC_BYTES, `max_bytes:` (the byte budget, py_backend/budget.py) as
  # NX_JAX_MAX_BYTES
  defp bytes_env(env, key, var) do
    case Application.get_env(:nx_jax, key) do
      nil ->
        env

      bytes when is_integer(bytes) and bytes > 0 ->
        if List.keymember?(env, var, 0),
          do: env,
          else: [{var, Integer.to_string(bytes)} | env]

      other ->
        raise ArgumentError,
              "config :nx_jax, #{key}: must be a positive integer of bytes, got: " <>
                inspect(other)
    end
  end

  ## A call's settings

  @doc """
  A call's `{timeout, reply_spin_us}`: its `:timeout` and `:reply_spin_us` options, else the
  defaults `load/0` read. Raises `ArgumentError` for a `reply_spin_us` that is not a
  non-negative integer (before anything is sent).
  """
  def call(opts) do
    {timeout, spin_us} = call_defaults()
    timeout = Keyword.get(opts, :timeout, timeout)
    spin_us = Keyword.get(opts, :reply_spin_us, spin_us)

    unless is_integer(spin_us) and spin_us >= 0 do
      raise ArgumentError,
            "reply_spin_us must be a non-negative integer (microseconds), got: #{inspect(spin_us)}"
    end

    {timeout, spin_us}
  end

  @doc "The timeout of a call that gives none, in milliseconds (`NxJax.Worker.default_timeout/0`)."
  def default_timeout, do: elem(call_defaults(), 0)

  @doc "How long a call that says nothing polls for its reply (`NxJax.Worker.reply_spin_us/0`)."
  def reply_spin_us, do: elem(call_defaults(), 1)

  @doc """
  Reads the call defaults (`config :nx_jax, timeout:` and `reply_spin_us:`) into
  `:persistent_term`; raises `ArgumentError` for a timeout that is not a positive integer or
  `:infinity`.
  """
  def load do
    :persistent_term.put(@call_defaults, read_call_defaults())
  end

  # (the environment itself where the application did not start)
  defp call_defaults do
    case :persistent_term.get(@call_defaults, nil) do
      nil -> read_call_defaults()
      defaults -> defaults
    end
  end

  defp read_call_defaults do
    timeout = checked_timeout(Application.get_env(:nx_jax, :timeout, @default_timeout))
    {timeout, Application.get_env(:nx_jax, :reply_spin_us, @default_reply_spin_us)}
  end

  defp checked_timeout(ms) when (is_integer(ms) and ms > 0) or ms == :infinity, do: ms

  defp checked_timeout(other) do
    raise ArgumentError,
          "config :nx_jax, timeout: must be a positive integer of milliseconds or :infinity, " <>
            "got: #{inspect(other)}"
  end
end
