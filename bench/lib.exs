# The helpers of the benchmarks (bench/run.exs, bench/pool_scaling.exs): the defns they call,
# percentiles, timers, the raw port baseline, CPU accounting and pool restarts.
defmodule Bench do
  import Nx.Defn

  @root Path.expand("..", __DIR__)

  defn small(x), do: x * 2 + 1

  # section 5's compute-bound call: about 1.6 ms of one core's XLA work per call here
  defn wide(x) do
    Nx.iota({400_000}, type: :f32) |> Nx.multiply(x) |> Nx.sin() |> Nx.cos() |> Nx.sum()
  end

  defn loss({w1, w2}, x, y) do
    pred = Nx.dot(Nx.tanh(Nx.dot(x, w1)), w2)
    Nx.mean((pred - y) * (pred - y))
  end

  defn step({w1, w2}, x, y) do
    {g1, g2} = grad({w1, w2}, &loss(&1, x, y))
    {w1 - 0.01 * g1, w2 - 0.01 * g2}
  end

  def python, do: NxJax.Worker.python_executable()

  def percentiles(samples_us) do
    sorted = Enum.sort(samples_us)
    n = length(sorted)
    %{p50: Enum.at(sorted, div(n, 2)), p99: Enum.at(sorted, min(n - 1, trunc(n * 0.99)))}
  end

  def time_us(fun) do
    t0 = System.monotonic_time(:nanosecond)
    fun.()
    (System.monotonic_time(:nanosecond) - t0) / 1000
  end

  def samples(n, fun) do
    for _ <- 1..50, do: fun.()
    for _ <- 1..n, do: time_us(fun)
  end

  def best(n, fun), do: Enum.min(for _ <- 1..n, do: time_us(fun))

  @doc """
  `k` timed steps (after 50 uncounted) of the training step of section 3 on row `row`'s
  resident weights, kept in this process under `{:bench_state, row}` (put there before the
  first batch) and freed by hand each step. Adds the BEAM's CPU time (all schedulers, ms) and
  the steps taken, warm-up included, to `{:bench_cpu, row}`: `{ms, steps}` (see `step_cpu/1`).
  """
  def resident_steps(row, step, k) do
    {cpu0, _} = :erlang.statistics(:runtime)

    samples =
      samples(k, fn ->
        {old1, old2} = old = Process.get({:bench_state, row})
        Process.put({:bench_state, row}, step.(old))
        :ok = Nx.backend_deallocate(old1)
        :ok = Nx.backend_deallocate(old2)
      end)

    {cpu1, _} = :erlang.statistics(:runtime)
    {ms, steps} = Process.get({:bench_cpu, row}, {0, 0})
    Process.put({:bench_cpu, row}, {ms + cpu1 - cpu0, steps + length(samples) + 50})
    samples
  end

  @doc "What `resident_steps/3` counted for `row` since this was last called: `{ms, steps}`."
  def step_cpu(row), do: Process.delete({:bench_cpu, row}) || {0, 0}

  # (this project's py_backend first on PYTHONPATH, as a worker's: a script run by its path
  # finds py_backend otherwise wherever the virtualenv's editable install points)
  def open_port(script, args \\ []) do
    Port.open({:spawn_executable, python()}, [
      {:packet, 4},
      :binary,
      :nouse_stdio,
      {:args, [Path.join(@root, script) | args]},
      {:cd, @root},
      {:env, [{~c"PYTHONPATH", String.to_charlist(@root)}]}
    ])
  end

  def port_call(port, data, timeout \\ 600_000) do
    true = Port.command(port, data)

    receive do
      {^port, {:data, reply}} -> reply
    after
      timeout -> :timeout
    end
  end

  @doc """
  `port_call/2` waiting as an nx_jax caller does (`NxJax.Worker`'s reply polling): polls its
  mailbox for `NxJax.Worker.reply_spin_us/0` microseconds, each poll counting a time slice of
  reductions (`NxJax.Worker.poll_reductions/0`), before it sleeps in `receive`.
  """
  def port_call_polling(port, data) do
    true = Port.command(port, data)
    await_polling(port)
  end

  @doc """
  The next `{port, {:data, reply}}` message's `reply`, waited for as `port_call_polling/2`
  does (whoever sends it: the port, or a process forwarding its replies).
  """
  def await_polling(port) do
    until = System.monotonic_time(:microsecond) + NxJax.Worker.reply_spin_us()
    poll_reply(port, until, NxJax.Worker.poll_reductions())
  end

  defp poll_reply(port, until, reductions) do
    receive do
      {^port, {:data, reply}} -> reply
    after
      0 ->
        if System.monotonic_time(:microsecond) < until do
          :erlang.bump_reductions(reductions)
          poll_reply(port, until, reductions)
        else
          receive do
            {^port, {:data, reply}} -> reply
          end
        end
    end
  end

  # Closes the port and kills its OS process: a baseline process still busy with a frame (the
  # ErlPort reader takes minutes over 128 MB) would otherwise eat a core during later sections.
  def close_port(port) do
    os_pid =
      case Port.info(port, :os_pid) do
        {:os_pid, pid} -> pid
        nil -> nil
      end

    try do
      Port.close(port)
    rescue
      ArgumentError -> :already_closed
    end

    if os_pid, do: System.cmd("kill", ["-9", Integer.to_string(os_pid)], stderr_to_stdout: true)
    :ok
  end

  def sh(cmd, args) do
    {out, 0} = System.cmd(cmd, args, stderr_to_stdout: true)
    String.trim(out)
  end

  def inprocess(n) do
    out = sh(python(), [Path.join(@root, "bench/inprocess.py"), Integer.to_string(n)])
    out |> String.split("\n") |> List.last() |> decode_json()
  end

  @doc "The time of each of `n` in-process JAX MLP steps (bench/inprocess.py), in us."
  def inprocess_mlp_samples(n) do
    out = sh(python(), [Path.join(@root, "bench/inprocess.py"), Integer.to_string(4 * n)])
    json_floats(out, "mlp_samples")
  end

  @doc "The time of each of `n` in-process jitted scalar calls (bench/inprocess.py), in us."
  def inprocess_scalar_samples(n) do
    out = sh(python(), [Path.join(@root, "bench/inprocess.py"), Integer.to_string(n)])
    json_floats(out, "scalar_samples")
  end

  defp json_floats(out, key) do
    [_, list] = Regex.run(~r/"#{key}": \[([^\]]*)\]/, out)
    list |> String.split(", ") |> Enum.map(&String.to_float/1)
  end

  # the tiny JSON of bench/inprocess.py: {"a": {"p50": 1.0, "p99": 2.0}, ...}
  defp decode_json(text) do
    Regex.scan(~r/"(\w+)": \{"p50": ([\d.e+-]+), "p99": ([\d.e+-]+)\}/, text)
    |> Map.new(fn [_, k, p50, p99] ->
      {k, %{p50: String.to_float(p50), p99: String.to_float(p99)}}
    end)
  end

  # CPU time (user + system, seconds) of an OS process so far, from /proc/<pid>/stat
  def cpu_s(os_pid) do
    stat = File.read!("/proc/#{os_pid}/stat")
    [_, after_comm] = String.split(stat, ") ", parts: 2)
    fields = String.split(after_comm, " ")
    (String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))) / 100
  end

  def restart_pool(size, worker_env \\ []) do
    :ok = Supervisor.terminate_child(NxJax.Supervisor, NxJax.Pool)
    Application.put_env(:nx_jax, :pool_size, size)
    Application.put_env(:nx_jax, :worker_env, worker_env)
    {:ok, _} = Supervisor.restart_child(NxJax.Supervisor, NxJax.Pool)
    for w <- NxJax.Pool.workers(), do: :pong = NxJax.Worker.call(:ping, [], server: w)
  end

  @doc """
  Whether this VM polls frequently read file descriptors from its scheduler threads (`+IOs
  true`, the default since OTP 25): `:erlang.system_info(:check_io)` then lists a kernel
  pollset that no poll thread serves. The worker's port is such a descriptor, and on a
  virtual machine this setting costs the small call tens of microseconds (docs/BENCHMARKS.md).
  """
  def scheduler_polling? do
    Enum.any?(:erlang.system_info(:check_io), fn set ->
      set[:kernel_poll] not in [false, nil] and set[:poll_threads] == 0
    end)
  end

  @doc """
  The rows of section 1 (the small call), measured in 20 interleaved rounds of `n / 20` calls
  each: `%{row => [sample_us]}` for `:ours` (the defn), `:ours_sleeping` (its caller not
  polling for the reply), `:ours_held` (the defn on a worker started with `lend_port: false`,
  every call through its GenServer), `:ping`, `:echo` (raw port echo), `:echo_spin` (the same echo polling
  like the worker), `:echo_poll` (that one, its caller polling like ours), `:floor`
  (bench/jax_echo.py) and `:floor_poll` (its caller polling).
  """
  def small_call_samples(n) do
    x = Nx.tensor(1.5)
    small(x)
    spin = Integer.to_string(NxJax.Worker.spin_us())
    echo_port = open_port("bench/port_echo.py")
    spin_port = open_port("bench/port_echo.py", ["--spin-us", spin])
    floor_port = open_port("bench/jax_echo.py", ["--spin-us", spin])
    <<_::32>> = port_call(floor_port, <<1.5::float-32-little>>)
    echo_frame = <<"e", 0::64>>

    # the same defn, its caller sleeping in `receive` at once (no reply polling)
    small_sleeping = Nx.Defn.jit(&small/1, reply_spin_us: 0)
    small_sleeping.(x)
    # the same defn on a worker that lends its port to no call
    {:ok, held} = NxJax.Worker.start_link(lend_port: false)
    small_held = Nx.Defn.jit(&small/1, server: held)
    small_held.(x)

    calls = [
      ours: fn -> small(x) end,
      ours_sleeping: fn -> small_sleeping.(x) end,
      ours_held: fn -> small_held.(x) end,
      ping: fn -> NxJax.Worker.call(:ping, []) end,
      echo: fn -> port_call(echo_port, echo_frame) end,
      echo_spin: fn -> port_call(spin_port, echo_frame) end,
      echo_poll: fn -> port_call_polling(spin_port, echo_frame) end,
      floor: fn -> <<_::32>> = port_call(floor_port, <<1.5::float-32-little>>) end,
      floor_poll: fn -> <<_::32>> = port_call_polling(floor_port, <<1.5::float-32-little>>) end
    ]

    # (20 rounds: a slow spell of the machine, seconds long, then lands on every row alike)
    rows = interleaved_samples(for({name, fun} <- calls, do: {name, &samples(&1, fun)}), n, 20)
    Enum.each([echo_port, spin_port, floor_port], &close_port/1)
    GenServer.stop(held)
    rows
  end

  @doc "`small_call_samples/1`'s rows as percentiles: `%{row => %{p50:, p99:}}`."
  def small_call_rows(n), do: to_percentiles(small_call_samples(n))

  @doc """
  Percentiles of each of `variants` (`{name, fun}`, `fun.(k)` giving `k` samples in us), `n`
  samples each, taken in `rounds` interleaved rounds (each round runs every variant in turn),
  so that drift on a shared machine spreads over all of them.
  """
  def interleaved(variants, n, rounds \\ 4),
    do: to_percentiles(interleaved_samples(variants, n, rounds))

  @doc "`interleaved/3`'s samples themselves: `%{name => [sample_us]}`, in the order taken."
  def interleaved_samples(variants, n, rounds \\ 4) do
    Enum.reduce(1..rounds, %{}, fn _, acc ->
      Enum.reduce(variants, acc, fn {name, fun}, acc ->
        got = fun.(div(n, rounds))
        Map.update(acc, name, got, &(&1 ++ got))
      end)
    end)
  end

  def to_percentiles(rows), do: Map.new(rows, fn {k, v} -> {k, percentiles(v)} end)

  @doc """
  The rows of section 3 (the MLP training step), `n` steps of each in 4 interleaved rounds:
  `%{row => %{p50:, p99:}}` for `:jax` (in-process, bench/inprocess.py), `:shipped`,
  `:resident` and `:resident_wait`; `mlp_samples/1` gives the samples themselves.
  """
  def mlp_rows(n), do: to_percentiles(mlp_samples(n))

  def mlp_samples(n) do
    key = Nx.iota({64, 256}, type: :f32)
    xs = Nx.divide(Nx.subtract(Nx.remainder(key, 17), 8), 8)
    ys = Nx.divide(Nx.iota({64, 1}, type: :f32), 64)
    w1 = Nx.iota({256, 256}, type: :f32) |> Nx.remainder(13) |> Nx.subtract(6) |> Nx.divide(6)
    w2 = Nx.iota({256, 1}, type: :f32) |> Nx.remainder(7) |> Nx.subtract(3) |> Nx.divide(3)
    {w1, w2} = {Nx.multiply(w1, 0.05), Nx.multiply(w2, 0.05)}
    rxs = Nx.backend_transfer(xs, NxJax.Backend)
    rys = Nx.backend_transfer(ys, NxJax.Backend)
    Process.put(:bench_shipped, {w1, w2})
    Process.put(:bench_resident, Nx.backend_transfer({w1, w2}, NxJax.Backend))

    variants = [
      jax: &inprocess_mlp_samples/1,
      shipped: fn n ->
        samples(n, fn ->
          Process.put(:bench_shipped, step(Process.get(:bench_shipped), xs, ys))
        end)
      end,
      resident: fn n ->
        samples(n, fn ->
          {old1, old2} = old = Process.get(:bench_resident)
          Process.put(:bench_resident, step(old, rxs, rys))
          # free the old weights: Nx.backend_deallocate/1 does not wait for the worker's reply
          :ok = Nx.backend_deallocate(old1)
          :ok = Nx.backend_deallocate(old2)
        end)
      end,
      # the same, waiting for the free's reply: one more round trip
      resident_wait: fn n ->
        samples(n, fn ->
          old = Process.get(:bench_resident)
          Process.put(:bench_resident, step(old, rxs, rys))
          {%{data: %{worker: w, handle: ha}}, %{data: %{handle: hb}}} = old
          2 = NxJax.Worker.free([ha, hb], server: w)
        end)
      end
    ]

    interleaved_samples(variants, n)
  end

  @doc """
  A section measured in a fresh VM started with `erl_flags` (bench/in_vm.exs): `"small"`
  gives `%{rows: small_call_rows(n), jax: in-process call, scheduler_polling:}`, `"mlp"`
  gives `%{rows: mlp_rows(n), scheduler_polling:}`. The flags go in `ERL_FLAGS`, replacing this
  VM's (which the child would inherit, and which `erl` applies after its command line); raises
  if the child's scheduler polling does not follow them.
  """
  def in_vm(erl_flags, section, n) do
    {out, 0} =
      System.cmd("elixir", ["-S", "mix", "run", "bench/in_vm.exs", section, Integer.to_string(n)],
        cd: @root,
        env: [{"ERL_FLAGS", erl_flags}],
        stderr_to_stdout: true
      )

    [_, encoded] = Regex.run(~r/IN_VM ([A-Za-z0-9+\/=]+)/, out)
    result = encoded |> Base.decode64!() |> :erlang.binary_to_term()
    expected = String.contains?(erl_flags, "+IOs true") or not String.contains?(erl_flags, "+IOs")

    if result.scheduler_polling != expected do
      raise "bench: a VM started with ERL_FLAGS=#{inspect(erl_flags)} has scheduler polling " <>
              "#{result.scheduler_polling}"
    end

    result
  end

  @doc """
  The small defn's encoded graph and graph key, `{graph_bin, key}`, from the trace cache (call
  `small/1` first). The cache holds it once per call option set (a `reply_spin_us: 0` jit has
  its own entry), all of one graph.
  """
  def small_graph, do: elem(small_trace(), 1)

  @doc """
  The trace cache's entry of `small/1` on a scalar f32 (as `small_graph/0`, after a first
  call): `{:graph, {graph_bin, key}, parameters, container, templates, hooks}`.
  """
  def small_trace do
    [entry] =
      Enum.uniq(
        for {{Nx.Defn.Compiler, _, _} = k, {entry, _used}} <- :persistent_term.get(),
            is_tuple(entry) and elem(entry, 0) == :graph and inspect(k) =~ "small",
            do: entry
      )

    entry
  end

  @doc """
  `measure.()` run with the processes `os_pids` (every thread) pinned to CPU 0 and a CPU-bound
  process pinned to CPU 1, what a CPU hog beside a benchmark brings about on a 2-core machine,
  made steady (bench/layers.exs, bench/layer_cuts.exs); nil where it cannot be set up (no
  `taskset`, fewer than 2 CPUs). The pins stay.
  """
  def colocated(os_pids, measure) do
    taskset = System.find_executable("taskset")

    if taskset && System.schedulers_online() >= 2 do
      # (-a: every thread, the BEAM's schedulers and JAX's among them)
      for p <- os_pids, do: {_, 0} = System.cmd(taskset, ["-a", "-p", "-c", "0", "#{p}"])

      hog =
        Port.open({:spawn_executable, python()}, [:binary, {:args, ["-c", "while True: pass"]}])

      {:os_pid, hog_pid} = Port.info(hog, :os_pid)

      try do
        {_, 0} = System.cmd(taskset, ["-p", "-c", "1", "#{hog_pid}"])
        Process.sleep(300)
        measure.()
      after
        close_port(hog)
      end
    end
  end

  def cpu_model do
    with {:ok, text} <- File.read("/proc/cpuinfo"),
         [_, name] <- Regex.run(~r/model name\s*:\s*(.+)/, text) do
      name
    else
      _ -> "unknown CPU"
    end
  end

  @doc """
  Calls per second of `callers` processes each making `calls` calls of `fun` (default
  `&small/1`, on the scalar 1.5) through a pool of `size` workers, and the cores each OS
  process kept busy meanwhile (CPU time over wall time, from /proc): `%{rate:, beam:,
  workers: [..]}`. Options: `:fun`, and `:one_thread` (true: every worker runs XLA on one
  thread, the single worker too; by default only a pool of more than one does, as
  `NxJax.Pool` starts them).
  """
  def pool_throughput(size, callers \\ 8, calls \\ 400, opts \\ []) do
    fun = Keyword.get(opts, :fun, &small/1)
    # (the one-thread environment NxJax.Pool gives each worker of a pool of more than one)
    env = if opts[:one_thread], do: NxJax.Pool.thread_env(2, []), else: []
    restart_pool(size, List.duplicate(env, size))
    x = Nx.tensor(1.5)
    fun.(x)
    for w <- NxJax.Pool.workers(), do: Nx.Defn.jit(fun, server: w).(x)
    os_pids = for w <- NxJax.Pool.workers(), do: NxJax.Worker.os_pid(w)
    beam = System.pid()
    cpu0 = Enum.map([beam | os_pids], &cpu_s/1)

    us =
      time_us(fn ->
        1..callers
        |> Enum.map(fn _ -> Task.async(fn -> for _ <- 1..calls, do: fun.(x) end) end)
        |> Enum.each(&Task.await(&1, 600_000))
      end)

    [beam_cores | worker_cores] =
      Enum.zip_with([beam | os_pids], cpu0, fn p, c0 -> (cpu_s(p) - c0) / (us / 1.0e6) end)

    %{rate: callers * calls / (us / 1.0e6), beam: beam_cores, workers: worker_cores}
  end
end
