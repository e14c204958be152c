# The nx_jax benchmark: `make bench` (or `mix run bench/run.exs`) runs it and writes
# docs/BENCHMARKS.md. Every figure is a ratio against a baseline measured in the same run, on the
# same machine, a few seconds apart. Not a test: nothing here asserts a timing.
defmodule Bench do
  import Nx.Defn

  @root Path.expand("..", __DIR__)

  defn small(x), do: x * 2 + 1

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

  def open_port(script) do
    Port.open({:spawn_executable, python()}, [
      {:packet, 4},
      :binary,
      :nouse_stdio,
      {:args, [Path.join(@root, script)]},
      {:cd, @root}
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

  def close_port(port) do
    Port.close(port)
  rescue
    ArgumentError -> :already_closed
  end

  def sh(cmd, args) do
    {out, 0} = System.cmd(cmd, args, stderr_to_stdout: true)
    String.trim(out)
  end

  def inprocess(n) do
    out = sh(python(), [Path.join(@root, "bench/inprocess.py"), Integer.to_string(n)])
    out |> String.split("\n") |> List.last() |> decode_json()
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

  def restart_pool(size) do
    :ok = Supervisor.terminate_child(NxJax.Supervisor, NxJax.Pool)
    Application.put_env(:nx_jax, :pool_size, size)
    {:ok, _} = Supervisor.restart_child(NxJax.Supervisor, NxJax.Pool)
    for w <- NxJax.Pool.workers(), do: :pong = NxJax.Worker.call(:ping, [], server: w)
  end
end

IO.puts("nx_jax benchmark: this takes a few minutes")
Bench.restart_pool(1)
n_small = 2000
r = %{}

# --- 1. small call ---------------------------------------------------------------------------
IO.puts("1. small call")
x = Nx.tensor(1.5)
Bench.small(x)
ours = Bench.percentiles(Bench.samples(n_small, fn -> Bench.small(x) end))
ping = Bench.percentiles(Bench.samples(n_small, fn -> NxJax.Worker.call(:ping, []) end))
echo_port = Bench.open_port("bench/port_echo.py")
echo_frame = <<"e", 0::64>>

echo = Bench.percentiles(Bench.samples(n_small, fn -> Bench.port_call(echo_port, echo_frame) end))

inproc = Bench.inprocess(n_small)
baseline_p50 = echo.p50 + inproc["scalar"].p50
baseline_p99 = echo.p99 + inproc["scalar"].p99
# where the Elixir side's time goes: the trace-cache lookup, parameter and wire conversion
{params, _} = Nx.Defn.Compiler.parameters([x])

elixir_side =
  Bench.percentiles(Bench.samples(n_small, fn -> Nx.Defn.Compiler.parameters([x]) end))

_ = params

# the worker's side of the same call, in-process (bench/handle_profile.py)
[{small_graph, small_key}] =
  for {{Nx.Defn.Compiler, _, _} = k, {:graph, gb, key, _, _, _}} <- :persistent_term.get(),
      inspect(k) =~ "small",
      do: {gb, key}

wire_x = {{:f, 32}, {}, Nx.to_binary(x)}
tmp = System.tmp_dir!()
req_graph = Path.join(tmp, "nx_jax_bench_graph.etf")
req_key = Path.join(tmp, "nx_jax_bench_key.etf")

File.write!(
  req_graph,
  :erlang.term_to_binary({:C, 1, :nx_jax, :call, [small_key, small_graph, [wire_x], false]})
)

File.write!(
  req_key,
  :erlang.term_to_binary({:C, 2, :nx_jax, :call, [small_key, nil, [wire_x], false]})
)

handle_profile =
  Bench.sh(Bench.python(), [
    Path.join(Path.expand("..", __DIR__), "bench/handle_profile.py"),
    req_graph,
    req_key,
    "2000"
  ])
  |> String.split("\n")
  |> List.last()
  |> then(&Regex.scan(~r/"(\w+)": ([\d.e+-]+)/, &1))
  |> Map.new(fn [_, k, v] -> {k, String.to_float(v)} end)

r =
  Map.put(r, :small, %{
    ours: ours,
    ping: ping,
    echo: echo,
    jax: inproc["scalar"],
    base: %{p50: baseline_p50, p99: baseline_p99},
    elixir_side: elixir_side,
    handle: handle_profile
  })

# --- 2. transfer -----------------------------------------------------------------------------
IO.puts("2. transfer")
erlport_port = Bench.open_port("bench/erlport_echo.py")

transfer =
  for mb <- [1, 16, 128] do
    IO.puts("   #{mb} MB")
    bytes = mb * 1_048_576
    data = :crypto.strong_rand_bytes(bytes)
    reps = if mb == 128, do: 3, else: 5
    t = {{:f, 32}, {div(bytes, 4)}, data}

    ours_in =
      Bench.best(reps, fn ->
        [h] = NxJax.Worker.put([t])
        send(self(), {:free, h})
      end)

    for _ <- 1..reps, do: receive(do: ({:free, h} -> NxJax.Worker.free([h])))
    [h] = NxJax.Worker.put([t])
    ours_out = Bench.best(reps, fn -> NxJax.Worker.fetch([h]) end)
    NxJax.Worker.free([h])

    raw_in = Bench.best(reps, fn -> Bench.port_call(echo_port, ["s", data]) end)
    raw_out = Bench.best(reps, fn -> Bench.port_call(echo_port, <<"g", bytes::64>>) end)

    # emqx-erlport's reader grows its buffer 64 KiB at a time (quadratic): cap the wait
    erl_in =
      Bench.time_us(fn ->
        send(
          self(),
          {:erl_in, Bench.port_call(erlport_port, :erlang.term_to_binary({:s, data}), 60_000)}
        )
      end)

    {erl_in, erlport_port} =
      receive do
        {:erl_in, :timeout} ->
          Bench.close_port(erlport_port)
          {:timeout, Bench.open_port("bench/erlport_echo.py")}

        {:erl_in, _} ->
          {erl_in, erlport_port}
      end

    erl_out =
      Bench.best(if(mb == 128, do: 1, else: reps), fn ->
        Bench.port_call(erlport_port, :erlang.term_to_binary({:g, bytes}))
      end)

    mbps = fn
      :timeout -> :timeout
      us -> mb / (us / 1.0e6)
    end

    %{
      mb: mb,
      ours_in: mbps.(ours_in),
      ours_out: mbps.(ours_out),
      raw_in: mbps.(raw_in),
      raw_out: mbps.(raw_out),
      erl_in: mbps.(erl_in),
      erl_out: mbps.(erl_out)
    }
  end

Bench.close_port(erlport_port)
Bench.close_port(echo_port)
r = Map.put(r, :transfer, transfer)

# memory of the worker: 128 MB in, 128 MB out
neg = Nx.Defn.jit(&Nx.negate/1)
big = Nx.iota({32 * 1_048_576}, type: :f32)
neg.(big)
:erlang.garbage_collect()
%{rss: idle} = NxJax.Worker.call(:memory, [true])
neg.(big)
%{peak_rss: peak} = NxJax.Worker.call(:memory, [false])
r = Map.put(r, :memory, %{idle: idle, peak: peak, tensor: 128 * 1_048_576})

# --- 3. MLP training step --------------------------------------------------------------------
IO.puts("3. MLP step")
key = Nx.iota({64, 256}, type: :f32)
xs = Nx.divide(Nx.subtract(Nx.remainder(key, 17), 8), 8)
ys = Nx.divide(Nx.iota({64, 1}, type: :f32), 64)

w1 =
  Nx.multiply(
    Nx.divide(Nx.subtract(Nx.remainder(Nx.iota({256, 256}, type: :f32), 13), 6), 6),
    0.05
  )

w2 =
  Nx.multiply(Nx.divide(Nx.subtract(Nx.remainder(Nx.iota({256, 1}, type: :f32), 7), 3), 3), 0.05)

n_mlp = 400
state = :ets.new(:bench, [:set, :public])
:ets.insert(state, {:shipped, {w1, w2}})

shipped =
  Bench.percentiles(
    Bench.samples(n_mlp, fn ->
      [{:shipped, p}] = :ets.lookup(state, :shipped)
      :ets.insert(state, {:shipped, Bench.step(p, xs, ys)})
    end)
  )

rxs = Nx.backend_transfer(xs, NxJax.Backend)
rys = Nx.backend_transfer(ys, NxJax.Backend)
Process.put(:resident, Nx.backend_transfer({w1, w2}, NxJax.Backend))

resident =
  Bench.percentiles(
    Bench.samples(n_mlp, fn ->
      old = Process.get(:resident)
      new = Bench.step(old, rxs, rys)
      # free the old weights: Nx.backend_deallocate/1 does not wait for the worker's reply
      {old1, old2} = old
      :ok = Nx.backend_deallocate(old1)
      :ok = Nx.backend_deallocate(old2)
      Process.put(:resident, new)
    end)
  )

# the same, waiting for the free's reply (as before release/2): one more round trip per step
resident_wait =
  Bench.percentiles(
    Bench.samples(n_mlp, fn ->
      old = Process.get(:resident)
      new = Bench.step(old, rxs, rys)
      {%{data: %{worker: w, handle: ha}}, %{data: %{handle: hb}}} = old
      2 = NxJax.Worker.free([ha, hb], server: w)
      Process.put(:resident, new)
    end)
  )

inproc_mlp = Bench.inprocess(4 * n_mlp)["mlp"]

r =
  Map.put(r, :mlp, %{
    shipped: shipped,
    resident: resident,
    resident_wait: resident_wait,
    jax: inproc_mlp
  })

# --- 4. repeated calls -----------------------------------------------------------------------
IO.puts("4. counters")
# the first call of EACH function (the defn and the eager Nx.exp) traces, sends and compiles;
# the window starts after both
Bench.small(x)
Nx.exp(x)
before = NxJax.Pool.stats()
for _ <- 1..100, do: Bench.small(x)
for _ <- 1..100, do: Nx.exp(x)
after_stats = NxJax.Pool.stats()

repeat_work =
  for k <- [:traces, :graph_sends, :compiles, :graph_resends],
      after_stats[k] - before[k] != 0,
      do: {k, after_stats[k] - before[k]}

if repeat_work != [] do
  raise "bench section 4: repeated calls did work again after their first call: " <>
          inspect(repeat_work)
end

r =
  Map.put(
    r,
    :counters,
    Map.new(
      [:traces, :trace_cache_hits, :graph_sends, :key_calls, :compiles, :cache_hits, :runs],
      &{&1, after_stats[&1] - before[&1]}
    )
  )

# --- 5. pool ---------------------------------------------------------------------------------
IO.puts("5. pool")

throughput = fn size ->
  Bench.restart_pool(size)
  Bench.small(x)
  for w <- NxJax.Pool.workers(), do: Nx.Defn.jit(&Bench.small/1, server: w).(x)
  calls = 400
  os_pids = for w <- NxJax.Pool.workers(), do: NxJax.Worker.os_pid(w)
  beam = System.pid()
  cpu0 = Enum.map([beam | os_pids], &Bench.cpu_s/1)

  us =
    Bench.time_us(fn ->
      1..8
      |> Enum.map(fn _ -> Task.async(fn -> for _ <- 1..calls, do: Bench.small(x) end) end)
      |> Enum.each(&Task.await(&1, 600_000))
    end)

  # cores busy during the run: CPU seconds / wall seconds, BEAM then each worker
  [beam_cores | worker_cores] =
    Enum.zip_with([beam | os_pids], cpu0, fn p, c0 -> (Bench.cpu_s(p) - c0) / (us / 1.0e6) end)

  %{rate: 8 * calls / (us / 1.0e6), beam: beam_cores, workers: worker_cores}
end

pool1 = throughput.(1)
pool2 = throughput.(2)
Bench.restart_pool(1)
r = Map.put(r, :pool, %{one: pool1, two: pool2})

# --- 6. load ---------------------------------------------------------------------------------
# test_elixir/load_test.exs's load: 50 processes x 200 random eager ops (add, multiply, max,
# negate, sum, ...) on random shapes, through a 2-worker pool; the latency of each call.
IO.puts("6. load")
Bench.restart_pool(2)

load_call = fn ->
  op = Enum.random([:add, :subtract, :multiply, :max, :min, :negate, :abs, :sum])
  shape = Enum.random([{}, {3}, {2, 3}, {4, 2}])
  type = Enum.random([{:s, 32}, {:f, 64}])
  size = shape |> Tuple.to_list() |> Enum.product()
  arity = if op in [:negate, :abs, :sum], do: 1, else: 2

  args =
    for _ <- 1..arity,
        do:
          Nx.tensor(for(_ <- 1..size, do: Enum.random(-999..999)), type: type)
          |> Nx.reshape(shape)

  Bench.time_us(fn -> apply(Nx, op, args) end)
end

# warm up every (op, shape, type) on both workers, then measure
for _ <- 1..2000, do: load_call.()

load_us =
  1..50
  |> Enum.map(fn _ -> Task.async(fn -> for _ <- 1..200, do: load_call.() end) end)
  |> Enum.flat_map(&Task.await(&1, 600_000))

Bench.restart_pool(1)
r = Map.put(r, :load, Bench.percentiles(load_us))

# --- report ----------------------------------------------------------------------------------
cpu =
  case File.read("/proc/cpuinfo") do
    {:ok, text} ->
      case Regex.run(~r/model name\s*:\s*(.+)/, text) do
        [_, name] -> name
        _ -> "unknown CPU"
      end

    _ ->
      "unknown CPU"
  end

info = NxJax.Worker.call(:info, [])
f = fn v, d -> :erlang.float_to_binary(v / 1, decimals: d) end
ratio = fn a, b -> f.(a / b, 2) end

mb_cell = fn
  :timeout -> "< 2.1 (> 60 s)"
  v -> f.(v, 1)
end

s = r.small
m = r.mlp
mem = r.memory

transfer_rows =
  Enum.map_join(r.transfer, "\n", fn t ->
    "| #{t.mb} MB | #{f.(t.ours_in, 0)} | #{f.(t.raw_in, 0)} | #{mb_cell.(t.erl_in)} | " <>
      "#{ratio.(t.ours_in, t.raw_in)} | #{f.(t.ours_out, 0)} | #{f.(t.raw_out, 0)} | " <>
      "#{mb_cell.(t.erl_out)} | #{ratio.(t.ours_out, t.raw_out)} |"
  end)

t128 = List.last(r.transfer)

pool_row = fn n, p ->
  total = p.beam + Enum.sum(p.workers)

  "| #{n} | #{f.(p.rate, 0)} | #{f.(p.beam, 2)} | " <>
    "#{Enum.map_join(p.workers, " / ", &f.(&1, 2))} | #{f.(total, 2)} |"
end

c = r.counters

report = """
# Benchmarks

Generated by `make bench` (`mix run bench/run.exs`) on #{Date.utc_today()} — do not edit by hand.

Machine: #{cpu}, #{System.schedulers_online()} cores, #{sh_mem = Bench.sh("sh", ["-c", "free -m | awk '/Mem:/ {print $2}'"])} MiB RAM,
#{Bench.sh("uname", ["-sr"])}; Erlang/OTP #{System.otp_release()}, Elixir #{System.version()},
Python #{Bench.sh(Bench.python(), ["-c", "import platform; print(platform.python_version())"])}, JAX #{info[:jax_version]} (#{info[:backend]}).
The machine is shared and noisy: every figure below is a ratio to a baseline measured in the
same run; absolute times are given only to read the ratios.

## 1. Small call (scalar f32 in and out, jitted defn `x * 2 + 1`), #{n_small} calls

| | p50 (us) | p99 (us) |
| --- | --- | --- |
| nx_jax `Bench.small(x)` | #{f.(s.ours.p50, 1)} | #{f.(s.ours.p99, 1)} |
| baseline: raw port echo + in-process jitted JAX | #{f.(s.base.p50, 1)} | #{f.(s.base.p99, 1)} |
| — raw port echo round trip (9-byte frame) | #{f.(s.echo.p50, 1)} | #{f.(s.echo.p99, 1)} |
| — in-process jitted JAX call (`np.asarray(f(x))`) | #{f.(s.jax.p50, 1)} | #{f.(s.jax.p99, 1)} |
| **ratio nx_jax / baseline** | **#{ratio.(s.ours.p50, s.base.p50)}** | **#{ratio.(s.ours.p99, s.base.p99)}** |

Target p50 ratio <= 1.5. Where the time goes (p50): `NxJax.Worker.call(:ping, [])`, the
GenServer + ETF + dispatch round trip with no JAX, takes #{f.(s.ping.p50, 1)} us
(#{ratio.(s.ping.p50, s.echo.p50)}x the raw echo); building the parameter expressions
(`Compiler.parameters/1`, on a trace-cache miss only) #{f.(s.elixir_side.p50, 1)} us; the rest of the call
(#{f.(s.ours.p50 - s.ping.p50, 1)} us) is the trace-cache lookup, decoding the tensor in
Python, the jitted call and encoding the result. The worker's side of this call measured
in-process (`bench/handle_profile.py`, no port): `Worker.handle` #{f.(s.handle["handle"], 1)} us, of which
decoding the request #{f.(s.handle["decode_fast"], 1)} us (our fast path; erlang-py takes
#{f.(s.handle["decode_erlang_py"], 1)} us on the same frame), encoding the reply
#{f.(s.handle["encode"], 1)} us and the jitted call with its result read back
#{f.(s.handle["jit"], 1)} us; the rest is dispatch, argument and signature checks in Python.
What bounds the figure: the baseline has no process hop and no term codec at all; each
of our calls crosses the caller -> worker GenServer -> port -> Python and back (the ping),
and runs about #{f.(s.handle["handle"] - s.handle["jit"], 0)} us of Python per call around
the jitted function. A caller that writes its request to the port itself (the GenServer
only registering it and routing the reply) was tried and not kept: in an interleaved A/B
(40 rounds, a worker with and one without it, same run) its ping p50 was 67-69 us against
40 us through the GenServer, since the caller still has to tell the GenServer about the
request and a port written by a process other than its owner answered no sooner. What is left
to close is the Python side (a C codec, less dispatch per call).

The Elixir side outside the ping is small (`mix run bench/profile_small.exs`, 2026-11-29, each
piece in isolation, mean of 10,000 calls): in the caller, the signature walk (`to_concrete`
and `{type, shape, vectorized_axes}` per leaf) 0.4 us, the `:persistent_term` lookup 0.05 us,
placement (`NxJax.Pool.with_worker/3`) 0.35-0.45 us, the wire form of the argument 0.15-0.3 us,
its iodata 0.2 us, rebuilding the result 0.1 us, the counters 0.1 us: about 1.5-2 us in all.
In the worker GenServer (eprof, 2000 calls of each) the small call does about 1.5x the work
of a ping (the graph key check and counters, a larger request, the deadline timer both
have), a few us. Tracing the worker's port (`PORT_TRACE=1`) puts almost all of the gap
between the small call and the ping between the request entering the port and the reply
leaving it: p50 145 us against 67 us, i.e. pipe + Python, not Elixir. Removed on this side:
building a parameter expression per argument on every call only to compute the cache key
(`Compiler.parameters/1`, 0.5-1 us, now run only on a cache miss; one walk gives the
signature and the concrete tensors) and flattening the result container per call (the
templates are kept in the cache entry). Not removed: the deadline timer of each request
(it is what replaces a stuck worker) and the pool's atomics (0.35 us).

## 2. Transfer (f32 tensors; MB/s, best of 3-5)

In = Elixir -> worker (`NxJax.Worker.put/2`: the tensor becomes resident), out = worker ->
Elixir (`NxJax.Worker.fetch/2`). Raw = `bench/port_echo.py` (preallocated readinto, no term
codec). ErlPort = `emqx-erlport`'s `Port` (`bench/erlport_echo.py`; 128 MB out is one run).

| size | in | raw in | ErlPort in | in / raw | out | raw out | ErlPort out | out / raw |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
#{transfer_rows}

Target at 128 MB: >= 500 MB/s each way or >= 50% of the raw port, whichever is lower: here
in #{f.(t128.ours_in, 0)} MB/s (#{ratio.(t128.ours_in, t128.raw_in)} of raw), out
#{f.(t128.ours_out, 0)} MB/s (#{ratio.(t128.ours_out, t128.raw_out)} of raw).

Worker memory while it takes a 128 MB argument and returns a 128 MB result (`jit(&Nx.negate/1)`):
peak RSS #{f.((mem.peak - mem.idle) / 1_048_576, 0)} MiB above the idle RSS, that is
**#{ratio.(mem.peak - mem.idle, mem.tensor)}x** the tensor (target < 3x).

## 3. MLP training step (x 64x256, w1 256x256, w2 256x1, tanh, MSE, SGD), #{n_mlp} steps

| | p50 (us) | p99 (us) | p50 / in-process JAX |
| --- | --- | --- | --- |
| in-process JAX (`bench/inprocess.py`) | #{f.(m.jax.p50, 1)} | #{f.(m.jax.p99, 1)} | 1.00 |
| nx_jax, weights resident | #{f.(m.resident.p50, 1)} | #{f.(m.resident.p99, 1)} | **#{ratio.(m.resident.p50, m.jax.p50)}** |
| — the same, waiting for each free's reply (`NxJax.Worker.free/2`) | #{f.(m.resident_wait.p50, 1)} | #{f.(m.resident_wait.p99, 1)} | #{ratio.(m.resident_wait.p50, m.jax.p50)} |
| nx_jax, weights shipped every step | #{f.(m.shipped.p50, 1)} | #{f.(m.shipped.p99, 1)} | **#{ratio.(m.shipped.p50, m.jax.p50)}** |

Targets: resident <= 1.5x, shipped <= 4x. The resident step sends two handles plus x and y
handles and gets two handles back (the results stay JAX arrays on the worker, never copied to
the host), then frees the two old weights with `Nx.backend_deallocate/1`, which waits for
nothing (`NxJax.Worker.release/2`: the caller takes the handles out of the worker's table of
live handles and the worker GenServer sends the `free` and drops its reply; the worker runs it
just before the next step). The row below it waits for the free's reply instead, the second
round trip per step of the previous bench. What bounds the figure: one port round trip per
step (the ping, section 1) and the worker's dispatch around the jitted step, on a machine whose
2 cores the BEAM, the Python loop and XLA's threads share; in-process JAX has no round trip and
frees by garbage collection. The shipped one moves 2 x 257 KiB of weights each way plus x
(64 KiB) in.

## 4. Repeated calls (100 calls of a defn and 100 eager `Nx.exp`, after the first call of each)

| traces | trace cache hits | graph sends | key-only calls | compiles | compile-cache hits | runs |
| --- | --- | --- | --- | --- | --- | --- |
| #{c.traces} | #{c.trace_cache_hits} | #{c.graph_sends} | #{c.key_calls} | #{c.compiles} | #{c.cache_hits} | #{c.runs} |

## 5. Pool (8 concurrent callers of the small defn, 400 calls each)

| workers | calls/s | cores busy: BEAM | cores busy: each worker | cores busy: total |
| --- | --- | --- | --- | --- |
#{pool_row.(1, r.pool.one)}
#{pool_row.(2, r.pool.two)}
| **ratio** | **#{ratio.(r.pool.two.rate, r.pool.one.rate)}** | | | |

Target >= 1.6. "Cores busy" is CPU time (user + system, `/proc/<pid>/stat`) over wall time
during the run. With 2 workers each one runs XLA on one thread (`NxJax.Pool`). With
#{System.schedulers_online()} cores, the BEAM (8 callers, the worker GenServers, port I/O) and
every Python worker share them: when the total is near #{System.schedulers_online()}, the machine
is saturated and a second worker can only take CPU from the BEAM and the first worker.

## 6. Load (50 processes x 200 random eager ops and shapes, 2-worker pool)

The load of `test_elixir/load_test.exs` (which checks every result): each call's latency,
including the time it waits behind the other 49 callers' calls.

| calls | p50 (us) | p99 (us) |
| --- | --- | --- |
| #{length(load_us)} | #{f.(r.load.p50, 0)} | #{f.(r.load.p99, 0)} |
"""

_ = sh_mem
File.write!(Path.join(Path.expand("..", __DIR__), "docs/BENCHMARKS.md"), report)
IO.puts(report)
