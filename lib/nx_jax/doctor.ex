defmodule NxJax.Doctor do
  @moduledoc """
  What `mix nx_jax.doctor` checks and prints: the worker's Python (where it was found, its
  version), JAX, jaxlib and NumPy, the platform and devices, x64, a worker started from this
  project (its protocol, its sources against the compiled digest, its round trip), and every
  setting of the `:nx_jax` application with where its value came from. Each problem comes with
  the fix.

  `report/1` returns the checks as data; `format/1` prints them.
  """

  @typedoc "One line of the report: `:ok`, `:info` or `:problem`, a label, a detail, a fix."
  @type check :: {:ok | :info | :problem, String.t(), String.t(), String.t() | nil}

  # {key, default (as the code that reads it says), what it is}
  @settings [
    {:python, nil, "the worker's Python"},
    {:pool_size, 1, "workers in the pool (or :per_device)"},
    {:platform, nil, "the JAX platform workers compute on"},
    {:device, nil, "the device index on that platform"},
    {:start_worker, true, "whether the application starts the pool"},
    {:timeout, 60_000, "default call timeout (ms)"},
    {:reply_spin_us, 100, "caller's polling for its reply (us)"},
    {:spin_us, 100, "worker's polling for the next request (us)"},
    {:lend_port, true, "repeated calls borrow the port"},
    {:max_frame, :quarter_of_memory, "largest request frame (bytes)"},
    {:numerics, :native, "f32 math as XLA (:native) or rounded as Nx (:nx)"},
    {:resident_gc_bytes, 67_108_864, "resident bytes grown between collections of holders"},
    {:max_bytes, :three_quarters_of_memory,
     "each worker's byte budget: resident tensors plus what a call needs"},
    {:worker_threads, :one, "XLA threads per worker when the pool has several"},
    {:remote, false, "place calls on workers of other nodes"},
    {:debug_nans, false, "run every call op by op, stopping at the first NaN"},
    {:max_restarts, 1_000_000, "the pool supervisor's restart intensity"}
  ]
  @variables ~w(NX_JAX_PYTHON NX_JAX_NUMERICS XLA_FLAGS JAX_PLATFORMS PYTHONPATH)

  # what the worker's Python reports about itself (one `key=value` per line)
  @probe """
  import sys
  print("version=" + sys.version.split()[0])
  print("executable=" + sys.executable)
  for name in ("jax", "jaxlib", "numpy"):
      try:
          module = __import__(name)
          print(name + "=" + getattr(module, "__version__", "?"))
      except Exception as exc:
          print(name + "=missing: " + type(exc).__name__ + ": " + str(exc).splitlines()[0])
  try:
      import py_backend.lower, jax
      print("x64=" + str(jax.config.jax_enable_x64).lower())
      print("platform=" + jax.default_backend())
      print("devices=" + ", ".join(str(d) for d in jax.devices()))
  except Exception as exc:
      print("py_backend=" + type(exc).__name__ + ": " + str(exc).splitlines()[0])
  """

  @doc """
  The checks, in order. Options: `:python` (check this executable instead of the configured
  one), `:env` (extra environment of the worker started for the check), `:pings` (round
  trips timed, default 200).
  """
  @spec report(keyword) :: [check]
  def report(opts \\ []) do
    {python, source} = python(opts)
    root = NxJax.Worker.Sources.project_root()
    head = [{:info, "project", root, nil}, python_check(python, source)]

    case probe(python, root) do
      {:ok, facts} ->
        head ++ python_checks(facts) ++ worker_checks(python, opts) ++ settings()

      {:error, detail} ->
        head ++ [{:problem, "python runs", detail, "make deps, or set a working Python"}]
    end
  end

  @doc "The report as text, one check per line (fixes indented under their problem)."
  @spec format([check]) :: String.t()
  def format(checks) do
    Enum.map_join(checks, "\n", fn {status, label, detail, fix} ->
      mark = %{ok: "ok     ", info: "       ", problem: "PROBLEM"}[status]
      line = "#{mark} #{String.pad_trailing(label, 22)} #{detail}"
      if fix, do: line <> "\n        fix: " <> fix, else: line
    end)
  end

  ## Python

  defp python(opts) do
    root = NxJax.Worker.Sources.project_root()
    venv = Path.join(root, ".venv/bin/python")

    cond do
      opts[:python] -> {opts[:python], "--python"}
      Application.get_env(:nx_jax, :python) -> {Application.get_env(:nx_jax, :python), "config"}
      System.get_env("NX_JAX_PYTHON") -> {System.get_env("NX_JAX_PYTHON"), "NX_JAX_PYTHON"}
      File.exists?(venv) -> {venv, "the project's .venv"}
      path = System.find_executable("python3") -> {path, "python3 on the PATH (no .venv)"}
      true -> {nil, "nowhere"}
    end
  end

  defp python_check(nil, _source),
    do: {:problem, "python", "none found", "make deps (creates .venv with the pinned packages)"}

  defp python_check(python, source) do
    if File.exists?(python) do
      {:ok, "python", "#{python} (from #{source})", nil}
    else
      {:problem, "python", "#{python} (from #{source}) does not exist",
       "make deps, or point config :nx_jax, python: / NX_JAX_PYTHON at a Python with JAX"}
    end
  end

  defp probe(nil, _root), do: {:error, "no Python to run"}

  defp probe(python, root) do
    if File.exists?(python) do
      {output, status} = System.cmd(python, ["-c", @probe], cd: root, stderr_to_stdout: true)

      facts =
        for line <- String.split(output, "\n"),
            [k, v] <- [String.split(line, "=", parts: 2)],
            into: %{},
            do: {k, v}

      if status == 0 and Map.has_key?(facts, "version"),
        do: {:ok, facts},
        else: {:error, "exit status #{status}: #{String.slice(output, 0, 300)}"}
    else
      {:error, "#{python} does not exist"}
    end
  end

  defp python_checks(facts) do
    version = facts["version"]

    {major, minor} =
      case Integer.parse(version) do
        {major, "." <> rest} ->
          {major, rest |> Integer.parse() |> then(&((&1 && elem(&1, 0)) || 0))}

        _ ->
          {0, 0}
      end

    version_check =
      if {major, minor} >= {3, 11},
        do: {:ok, "python version", version, nil},
        else:
          {:problem, "python version", "#{version} (needs 3.11 or later)",
           "make deps with a Python 3.11 on the PATH, or set config :nx_jax, python:"}

    packages =
      for name <- ~w(jax jaxlib numpy) do
        case facts[name] do
          "missing" <> _ = why ->
            {:problem, name, why, "make deps (pip install -c requirements.lock -e .)"}

          value ->
            {:ok, name, value, nil}
        end
      end

    backend =
      case facts do
        %{"platform" => platform} ->
          [
            {:ok, "platform", platform, nil},
            {:info, "devices", facts["devices"], nil},
            {x64_status(facts["x64"]), "x64", facts["x64"] || "?", nil}
          ]

        %{"py_backend" => why} ->
          [{:problem, "py_backend", why, "make deps, then mix compile"}]
      end

    [version_check | packages] ++ backend
  end

  defp x64_status("true"), do: :ok
  defp x64_status(_), do: :problem

  ## A worker of this project

  defp worker_checks(python, opts) do
    name = :"nx_jax_doctor_#{System.unique_integer([:positive])}"
    start = [name: name, python: python, env: Keyword.get(opts, :env, [])]
    # (a worker that cannot start must not take the caller down; the flag is put back after)
    trapping = Process.flag(:trap_exit, true)

    try do
      checked_worker(start, opts)
    after
      Process.flag(:trap_exit, trapping)
    end
  end

  defp checked_worker(start, opts) do
    name = start[:name]

    case NxJax.Worker.start_link(start) do
      {:ok, pid} ->
        try do
          info = NxJax.Worker.call(:info, [], server: name, timeout: 120_000)
          handshake(info) ++ [round_trip(name, Keyword.get(opts, :pings, 200))]
        rescue
          error in NxJax.WorkerError ->
            [{:problem, "worker", Exception.message(error), "make deps, then mix compile"}]
        after
          GenServer.stop(pid)

          receive do
            {:EXIT, ^pid, _} -> :ok
          after
            0 -> :ok
          end
        end

      {:error, reason} ->
        [{:problem, "worker", "did not start: #{inspect(reason)}", "make deps"}]
    end
  end

  defp handshake(info) do
    protocol =
      if info.protocol == NxJax.Worker.Sources.protocol(),
        do: {:ok, "protocol", "#{info.protocol}", nil},
        else:
          {:problem, "protocol",
           "worker #{info.protocol}, Elixir #{NxJax.Worker.Sources.protocol()}",
           "mix compile --force"}

    sources =
      case info.refusal do
        nil ->
          {:ok, "worker sources", "#{info.package} (digest #{info.sources})", nil}

        why ->
          {:problem, "worker sources", why,
           "mix compile --force in the project that holds #{info.package}"}
      end

    [protocol, sources, {:info, "worker JAX", "#{info.jax_version} on #{info.backend}", nil}]
  end

  defp round_trip(name, pings) do
    times =
      for _ <- 1..pings do
        start = System.monotonic_time(:microsecond)
        :pong = NxJax.Worker.call(:ping, [], server: name)
        System.monotonic_time(:microsecond) - start
      end

    sorted = Enum.sort(times)
    p50 = Enum.at(sorted, div(pings, 2))
    p99 = Enum.at(sorted, min(pings - 1, div(pings * 99, 100)))
    {:ok, "round trip (ping)", "p50 #{p50} us, p99 #{p99} us over #{pings} calls", nil}
  end

  ## Settings

  defp settings do
    config =
      for {key, default, what} <- @settings do
        case Application.fetch_env(:nx_jax, key) do
          {:ok, value} -> {:info, "#{key}", "#{inspect(value)} (config; #{what})", nil}
          :error -> {:info, "#{key}", "#{inspect(default)} (default; #{what})", nil}
        end
      end

    pool =
      if Process.whereis(NxJax.Pool),
        do: [{:info, "pool", "#{length(NxJax.Pool.workers())} worker(s) running", nil}],
        else: [{:info, "pool", "not started in this VM", nil}]

    variables =
      for name <- @variables,
          value = System.get_env(name),
          do: {:info, name, "#{value} (environment)", nil}

    config ++ pool ++ variables
  end
end
