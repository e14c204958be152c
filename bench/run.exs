# The nx_jax benchmark: `make bench` (or `mix run bench/run.exs`) runs it and writes
# docs/BENCHMARKS.md. Every figure is a ratio against a baseline measured in the same run, on the
# same machine, a few seconds apart. Not a test: nothing here asserts a timing.
Code.require_file("lib.exs", __DIR__)

IO.puts("nx_jax benchmark: this takes a few minutes")
Bench.restart_pool(1)
n_small = 2000
r = %{}

# --- 1. small call ---------------------------------------------------------------------------
IO.puts("1. small call")
x = Nx.tensor(1.5)
Bench.small(x)
echo_port = Bench.open_port("bench/port_echo.py")
spin_us = NxJax.Worker.spin_us()
spin_port = Bench.open_port("bench/port_echo.py", ["--spin-us", Integer.to_string(spin_us)])
floor_port = Bench.open_port("bench/jax_echo.py", ["--spin-us", Integer.to_string(spin_us)])
<<_::32>> = Bench.port_call(floor_port, <<1.5::float-32-little>>)
echo_frame = <<"e", 0::64>>

# four rounds, each measuring every variant in turn, so that drift on the shared machine
# spreads over all of them
small_variants = [
  ours: fn -> Bench.small(x) end,
  ping: fn -> NxJax.Worker.call(:ping, []) end,
  echo: fn -> Bench.port_call(echo_port, echo_frame) end,
  echo_spin: fn -> Bench.port_call(spin_port, echo_frame) end,
  floor: fn -> <<_::32>> = Bench.port_call(floor_port, <<1.5::float-32-little>>) end
]

small_samples =
  Enum.reduce(1..4, %{}, fn _, acc ->
    Enum.reduce(small_variants, acc, fn {name, fun}, acc ->
      Map.update(
        acc,
        name,
        Bench.samples(div(n_small, 4), fun),
        &(&1 ++ Bench.samples(div(n_small, 4), fun))
      )
    end)
  end)

%{ours: ours, ping: ping, echo: echo, echo_spin: echo_spin, floor: floor} =
  Map.new(small_samples, fn {k, v} -> {k, Bench.percentiles(v)} end)

Bench.close_port(spin_port)
Bench.close_port(floor_port)
inproc = Bench.inprocess(n_small)
baseline_p50 = echo.p50 + inproc["scalar"].p50
baseline_p99 = echo.p99 + inproc["scalar"].p99
# the worker's side of the same call, in-process (bench/handle_profile.py)
[{small_graph, small_key}] =
  for {{Nx.Defn.Compiler, _, _} = k, entry} <- :persistent_term.get(),
      is_tuple(entry) and elem(entry, 0) == :graph and inspect(k) =~ "small",
      do: {elem(entry, 1), elem(entry, 2)}

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
    echo_spin: echo_spin,
    floor: floor,
    base_spin: %{
      p50: echo_spin.p50 + inproc["scalar"].p50,
      p99: echo_spin.p99 + inproc["scalar"].p99
    },
    spin_us: spin_us,
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
rxs = Nx.backend_transfer(xs, NxJax.Backend)
rys = Nx.backend_transfer(ys, NxJax.Backend)
Process.put(:resident, Nx.backend_transfer({w1, w2}, NxJax.Backend))

mlp_variants = [
  jax: &Bench.inprocess_mlp_samples/1,
  shipped: fn n ->
    Bench.samples(n, fn ->
      [{:shipped, p}] = :ets.lookup(state, :shipped)
      :ets.insert(state, {:shipped, Bench.step(p, xs, ys)})
    end)
  end,
  resident: fn n ->
    Bench.samples(n, fn ->
      old = Process.get(:resident)
      new = Bench.step(old, rxs, rys)
      # free the old weights: Nx.backend_deallocate/1 does not wait for the worker's reply
      {old1, old2} = old
      :ok = Nx.backend_deallocate(old1)
      :ok = Nx.backend_deallocate(old2)
      Process.put(:resident, new)
    end)
  end,
  # the same, waiting for the free's reply (as before release/2): one more round trip per step
  resident_wait: fn n ->
    Bench.samples(n, fn ->
      old = Process.get(:resident)
      new = Bench.step(old, rxs, rys)
      {%{data: %{worker: w, handle: ha}}, %{data: %{handle: hb}}} = old
      2 = NxJax.Worker.free([ha, hb], server: w)
      Process.put(:resident, new)
    end)
  end
]

# four rounds, each running every variant in turn (in-process JAX included), as in section 1
mlp =
  Enum.reduce(1..4, %{}, fn _, acc ->
    Enum.reduce(mlp_variants, acc, fn {name, fun}, acc ->
      samples = fun.(div(n_mlp, 4))
      Map.update(acc, name, samples, &(&1 ++ samples))
    end)
  end)
  |> Map.new(fn {k, v} -> {k, Bench.percentiles(v)} end)

r = Map.put(r, :mlp, mlp)

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

pool1 = Bench.pool_throughput(1)
pool2 = Bench.pool_throughput(2)
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
cpu = Bench.cpu_model()

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

pool_total = fn p -> p.beam + Enum.sum(p.workers) end

pool_verdict =
  if pool_total.(r.pool.two) >= 0.9 * System.schedulers_online(),
    do: "saturated, a second worker can only take CPU from the BEAM and the first worker",
    else:
      "not saturated in this run, which was bound by latency (wake-ups on a shared " <>
        "machine) rather than CPU"

pool_row = fn n, p ->
  total = pool_total.(p)

  "| #{n} | #{f.(p.rate, 0)} | #{f.(p.beam, 2)} | " <>
    "#{Enum.map_join(p.workers, " / ", &f.(&1, 2))} | #{f.(total, 2)} |"
end

c = r.counters

# bench/pool_scaling.exs run once on a larger machine (committed output), if there is one
pool_scaling_note =
  case File.read(Path.join(Path.expand("..", __DIR__), "bench/pool_scaling.md")) do
    {:ok, text} -> String.trim(text)
    {:error, _} -> "(No run of `bench/pool_scaling.exs` on a larger machine is recorded.)"
  end

report = """
# Benchmarks

Generated by `make bench` (`mix run bench/run.exs`) on #{Date.utc_today()} — do not edit by hand.

Machine: #{cpu}, #{System.schedulers_online()} cores, #{sh_mem = Bench.sh("sh", ["-c", "free -m | awk '/Mem:/ {print $2}'"])} MiB RAM,
#{Bench.sh("uname", ["-sr"])}; Erlang/OTP #{System.otp_release()}, Elixir #{System.version()},
Python #{Bench.sh(Bench.python(), ["-c", "import platform; print(platform.python_version())"])}, JAX #{info[:jax_version]} (#{info[:backend]}).
The machine is shared and noisy: every figure below is a ratio to a baseline measured in the
same run; absolute times are given only to read the ratios.

## 1. Small call (scalar f32 in and out, jitted defn `x * 2 + 1`), #{n_small} calls

Measured in 4 interleaved rounds (each round runs every row in turn).

| | p50 (us) | p99 (us) |
| --- | --- | --- |
| nx_jax `Bench.small(x)` | #{f.(s.ours.p50, 1)} | #{f.(s.ours.p99, 1)} |
| baseline: raw port echo + in-process jitted JAX | #{f.(s.base.p50, 1)} | #{f.(s.base.p99, 1)} |
| — raw port echo round trip (9-byte frame, `bench/port_echo.py`) | #{f.(s.echo.p50, 1)} | #{f.(s.echo.p99, 1)} |
| — in-process jitted JAX call (`np.asarray(f(x))`) | #{f.(s.jax.p50, 1)} | #{f.(s.jax.p99, 1)} |
| **ratio nx_jax / baseline** | **#{ratio.(s.ours.p50, s.base.p50)}** | **#{ratio.(s.ours.p99, s.base.p99)}** |
| `NxJax.Worker.call(:ping, [])` (no JAX) | #{f.(s.ping.p50, 1)} | #{f.(s.ping.p99, 1)} |
| raw port echo whose reader also polls #{s.spin_us} us (`--spin-us`, as the worker) | #{f.(s.echo_spin.p50, 1)} | #{f.(s.echo_spin.p99, 1)} |
| ratio nx_jax / (that echo + in-process JAX) | #{ratio.(s.ours.p50, s.base_spin.p50)} | #{ratio.(s.ours.p99, s.base_spin.p99)} |
| floor: that port + the jitted call in the Python process behind it (`bench/jax_echo.py`) | #{f.(s.floor.p50, 1)} | #{f.(s.floor.p99, 1)} |
| ratio nx_jax / floor | #{ratio.(s.ours.p50, s.floor.p50)} | #{ratio.(s.ours.p99, s.floor.p99)} |
| ratio floor / baseline | #{ratio.(s.floor.p50, s.base.p50)} | #{ratio.(s.floor.p99, s.base.p99)} |

Target p50 ratio <= 1.5 against the baseline as the issue defines it (raw echo with a reader
that sleeps in `read`, plus the jitted call in a hot in-process loop). The rows below it read
the figure: our worker polls its pipe for #{s.spin_us} us after a reply instead of sleeping
(`:spin_us`), so an echo that does the same is shown too; the *floor* is the same raw port with
the jitted call made in the Python process behind it and nothing else (no term codec, no
request parsing, no GenServer): what any Python worker calling JAX pays at least.

What bounds it. The floor alone is #{ratio.(s.floor.p50, s.base.p50)}x the baseline in this run (1.4-2.4 in the runs of
2026-11-29): in a
process that alternates with pipe I/O the JAX call and the reply's `write` cost more than in
a hot loop (instrumented, below), so on this machine a ratio of 1.5 is out of reach for any
Python worker whenever the raw echo takes its fast path. That path depends on where the
kernel puts the processes: pinned with `taskset` (2026-11-29, 3000 round trips each), the echo
takes 13-14 us when it runs on the BEAM's vCPU and 40-53 us on the other one (waking a sleeping
process on another vCPU costs ~20 us each way on this VM), whatever the echo process holds (bare
Python, or JAX after a jitted call). Runs where the echo paid that wake-up gave a baseline of
~57 us and a ratio of 1.2-1.5 (the previous version of this file: 62 us); the runs of
2026-11-29 after the echo moved to one `writev` per reply gave 13 us. The ratio to the floor is
what is ours: #{ratio.(s.ours.p50, s.floor.p50)}x.

Where ours exceeds the floor (timestamps in both Python loops, 2026-11-29, 3 runs of 3000
calls each, p50): from writing the reply to having read the next request (the BEAM side: the
GenServer hop and its bookkeeping, the ETF of request and reply, the caller's signature walk
and result rebuild, plus the pipes) 28-30 us against 18-19; handling the request 25.5-26 us
against 12-12.6 (the layout match, the arguments, the program and signature lookups, and a JAX
call that runs colder after more Python); writing the reply 12.5-12.8 us against 10-10.4. On
the BEAM side (timestamps in the caller and the GenServer, 3000 calls, p50): the caller from
the call to sending its request 4.4 us (since trimmed: no devectorize of plain arguments, one
`term_to_binary` for small arguments), the GenServer from that message to `Port.command` 3.0 us
(since trimmed: request bytes made at compile time), from the reply's arrival to answering
the caller 2.6 us, each message between the two processes 1.8 us, the caller from the reply
to returning 1.3 us. The same request handled in-process in
a tight loop (`bench/handle_profile.py`, caches warm): `Worker.handle` #{f.(s.handle["handle"], 1)} us
on the learned path (recognising the layout #{f.(s.handle["match"], 1)} us), #{f.(s.handle["handle_generic"], 1)} us on the generic
one (decoding the request #{f.(s.handle["decode_fast"], 1)} us with our decoder, #{f.(s.handle["decode_erlang_py"], 1)} us with
erlang-py; encoding the reply #{f.(s.handle["encode"], 1)} us); the jitted call with its result
read back #{f.(s.handle["jit"], 1)} us.

What changed for this figure (issue #4, 2026-11-29): the worker polls its request pipe for
#{s.spin_us} us after each reply before sleeping in `select` (the sleeping worker's wake-up was
~30 us of every call; an idle worker uses no CPU: `test_elixir/worker_test.exs`); a small
request is read with one `read` (header and payload) and a reply written with one `write` (it
was the header and then each chunk, each waking the reader); a key-only `call` that repeats one
served before is recognised byte for byte outside its id and tensor data
(`py_backend/fastcall.py`: no term decoding, request parsing or argument checks; the reply is
written from cached tensor headers, byte-identical to the generic encoder's); on the Elixir
side a little less work per call (above). Together: the
small call went from 153 us to 66-75 us p50 in the same conditions, the ping from 73 us to 41.
Tried and not kept: `jax_cpu_enable_async_dispatch = False`, single-threaded XLA
(`XLA_FLAGS`), BEAM busy-wait flags (`+sbwt`, `+swt`, `+S 1`): no change beyond the noise; a
GenServer between caller and port costs 1-2 us (an echo through one: 21 us against 20 direct),
so the hop itself is not the cost; a caller writing its request to the port itself was slower
(ping 67 us against 40).

The Elixir side (`mix run bench/profile_small.exs`, each piece in isolation, mean of 10,000
calls): in the caller, the signature walk 0.4 us, the `:persistent_term` lookup 0.05 us,
placement (`NxJax.Pool.with_worker/3`) 0.35-0.45 us, the wire form of the argument and its
iodata 0.35-0.5 us, rebuilding the result 0.1 us, the counters 0.1 us: about 1.5-2 us in all.

On the 16-core machine of section 5 (Xeon, JAX 0.11.2 on its CPU, 2026-11-29, before the last
Elixir-side and reply-plan trims above, 4 x 500 calls of each row interleaved, `:spin_us`
100 / 0 / 100 / 0): nx_jax 56 / 55 / 47 / 63 us, ping 35 / 33 / 31 / 38, raw echo
20 / 17 / 16 / 20, in-process JAX 13 / 9 / 13 / 9, floor 27 / 40 / 21 / 35: ratios to the
baseline 1.73 / 2.07 / 1.59 / 2.20, to the floor 2.06 / 1.36 / 2.20 / 1.77. There waking a
process is cheap, the echo is fast wherever it runs, the floor (with polling) is at or below
the baseline, and what stands between us and 1.5 is our own time: the GenServer round trip with
its bookkeeping, the term codec at both ends and the Python around the jitted call, 25-30 us.
The BEAM's schedulers and the machine's moment count there (`:spin_us` 100, this version):
with the default 16 schedulers, nx_jax 46.5 / 50.8 us in two runs, ping 33 / 31, floor 26 / 31,
an echo through a bare GenServer 18 / 16.5 against 13.8 / 13.3 direct; with `+S 4`, nx_jax
62 / 48, ping 41 / 33, floor 26 / 27. In-process JAX measured 16 us in the same session (9-13
in earlier ones), so the default runs are 1.56x and 1.73x the baseline.

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

Measured in 4 interleaved rounds of #{div(n_mlp, 4)} steps (each round runs every row in turn, the
in-process JAX one included).

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
during the run. With 2 workers each one runs XLA on one thread (`NxJax.Pool`).

What bounds it here: with one worker the calls kept #{f.(pool_total.(r.pool.one), 2)} of the machine's
#{System.schedulers_online()} cores busy (the worker itself #{f.(hd(r.pool.one.workers), 2)}: one Python process serves one
request at a time; the BEAM #{f.(r.pool.one.beam, 2)}). A second worker cannot make a call cost less
CPU, so however the calls are spread the throughput can grow at most
#{System.schedulers_online()} / #{f.(pool_total.(r.pool.one), 2)} = **#{f.(System.schedulers_online() / pool_total.(r.pool.one), 2)}x** on this machine. With 2 workers the total was
#{f.(pool_total.(r.pool.two), 2)} of #{System.schedulers_online()}: #{pool_verdict}. Nothing in the pool serialises the calls
(each worker has its own GenServer and port; placement reads an atomic counter per worker).
Run on its own (`Bench.pool_throughput/3` in a fresh `mix run`, 2026-11-29, 6 runs, `:spin_us`
100 and 0 alternating) the same bench gave 23,000-41,000 calls/s with one worker (in two
clusters, 23-25k and 36-41k; 1.3-1.8 cores busy) and 24,900-28,000 with two (1.6-2.0 cores
busy): ratios 0.62-1.2, with no difference between polling and not ("cores busy" counts a
worker's polling too). On this machine a second worker does not pay. (Earlier runs of this
bench left the ErlPort baseline process of section 2 reading its 128 MB frame for minutes,
eating a core during sections 3-6; `Bench.close_port/1` now kills it.) On a machine with
cores to spare the same bench scales: 2.07x with 2 workers and 3.21x with 4 on 16 cores (below,
this version); runs of earlier versions there on 2026-11-29 gave 1.91x, 1.81x and 3.19x with 2
workers, the one-worker figure varying most (17,300-33,000 calls/s).

#{pool_scaling_note}

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
