# Each latency mechanism, switched off one at a time without editing the code (the worker's
# start options, its `off:` for the Elixir side's and its NX_JAX_OFF for the Python side's; the
# front end's `planned_calls: false`), measured on the machine as it is ("quiet") and again with one CPU-bound process (a
# Python busy loop) running beside the benchmark ("hog"): the small call, and a resident
# training step on the same workers; then the MLP step of section 3, resident and shipped. Every
# figure is a ratio to a baseline, or a difference to a row, of the same condition of one run.
#
#   mix run bench/mechanisms.exs [small_calls] [mlp_steps]     (make bench-mechanisms)
#
# Rewrites sections 8 ("Latency mechanisms") and 9 (its reading) of docs/BENCHMARKS.md and
# prints them.
Code.require_file("lib.exs", __DIR__)
Code.require_file("section.exs", __DIR__)

{n_small, n_mlp} =
  case System.argv() do
    [a, b] -> {String.to_integer(a), String.to_integer(b)}
    [a] -> {String.to_integer(a), 400}
    [] -> {2000, 400}
  end

Bench.restart_pool(1)
x = Nx.tensor(1.5)
Bench.small(x)

# the worker's switches (py_backend/request_loop.py MECHANISMS)
off = fn names -> [env: [{"NX_JAX_OFF", Enum.join(names, ",")}]] end
no_layouts = [env: [{"NX_JAX_FAST_PATHS", "0"}]]

all_python = ~w(spin_pause spin_move fast_one fast_hot free_after_reply decode_fast)
# the Elixir side's (NxJax.Worker.Config.mechanisms/0)
all_elixir = [:keeper, :kept_alias, :poll_reductions, :late_replies]

# {row, side, worker options, jit options, what is switched off}: each row a worker of its own
variants = [
  {:all_on, nil, [], [], "nothing (every mechanism on: the defaults)"},
  {:reply_spin, "Elixir", [], [reply_spin_us: 0],
   "the caller's reply polling (`reply_spin_us: 0`: it sleeps in `receive` at once)"},
  {:lent_port, "Elixir", [lend_port: false], [],
   "the lent port (`lend_port: false`: every call through the GenServer)"},
  {:keeper, "Elixir", [off: [:keeper]], [],
   "the suspended keeper (`off: [:keeper]`: the port rests with the GenServer, which each " <>
     "borrowed call's connect wakes)"},
  {:kept_alias, "Elixir", [lend_port: false, off: [:kept_alias]], [],
   "the kept reply alias and the lent port (`lend_port: false, off: [:kept_alias]`: an alias " <>
     "made and removed per call)"},
  {:poll_reductions, "Elixir", [off: [:poll_reductions]], [],
   "a poll's time slice (`off: [:poll_reductions]`: no `bump_reductions` per poll)"},
  {:late_replies, "Elixir", [off: [:late_replies]], [],
   "the count of late replies (`off: [:late_replies]`: a caller polls however late its " <>
     "replies came)"},
  {:plans, "nx/", [], [planned_calls: false],
   "the plans of repeated jitted calls (`planned_calls: false`: every call by the general path)"},
  {:worker_spin, "Python", [spin_us: 0], [],
   "the worker's spin (`spin_us: 0`: it sleeps in `read` at once)"},
  {:spin_pause, "Python", off.(~w(spin_pause)), [],
   "the spin's pause after it lost its CPU (`NX_JAX_OFF=spin_pause`)"},
  {:spin_move, "Python", off.(~w(spin_move)), [],
   "the spin's move to another CPU to spin on (`NX_JAX_OFF=spin_move`)"},
  {:fast_one, "Python", off.(~w(fast_one)), [],
   "tier 1: one tensor in, one small out, the reply frame in one call (`NX_JAX_OFF=fast_one`)"},
  {:fast_hot, "Python", off.(~w(fast_hot)), [],
   "tier 2: the layout served last, in one call (`NX_JAX_OFF=fast_hot`)"},
  {:fast_one_hot, "Python", off.(~w(fast_one fast_hot)), [],
   "tiers 1 and 2: the learned layouts looked up (tier 3) serve every call " <>
     "(`NX_JAX_OFF=fast_one,fast_hot`)"},
  {:layouts, "Python", no_layouts, [],
   "the learned byte layouts, all three tiers (`NX_JAX_FAST_PATHS=0`: the generic decoder)"},
  {:decode_fast, "Python", [env: [{"NX_JAX_FAST_PATHS", "0"} | off.(~w(decode_fast))[:env]]], [],
   "the learned byte layouts and the hand decoder of small requests (`NX_JAX_FAST_PATHS=0`, " <>
     "`NX_JAX_OFF=decode_fast`: erlang-py decodes every request)"},
  {:free_after_reply, "Python", off.(~w(free_after_reply)), [],
   "a call's results released after its reply is written (`NX_JAX_OFF=free_after_reply`)"},
  {:none, nil,
   [
     spin_us: 0,
     lend_port: false,
     off: all_elixir,
     env: [{"NX_JAX_FAST_PATHS", "0"} | off.(all_python)[:env]]
   ], [reply_spin_us: 0, planned_calls: false], "all of the above"}
]

names = for {name, _, _, _, _} <- variants, do: name
label = Map.new(variants, fn {name, _, _, _, text} -> {name, text} end)
side = Map.new(variants, fn {name, s, _, _, _} -> {name, s} end)

# the training step of section 3 with its weights resident on `pid`, the old ones freed each
# step as a loop's garbage would be (Bench.mlp_samples/1's :resident row)
put_on = fn t, pid ->
  [{:ref, handle, guard}] = NxJax.Worker.put([{t.type, t.shape, Nx.to_binary(t)}], server: pid)

  %Nx.Tensor{t | data: %NxJax.Backend{worker: pid, handle: handle, guard: guard}}
end

xs = Nx.iota({64, 256}, type: :f32) |> Nx.remainder(17) |> Nx.subtract(8) |> Nx.divide(8)
ys = Nx.divide(Nx.iota({64, 1}, type: :f32), 64)
w1 = Nx.iota({256, 256}, type: :f32) |> Nx.remainder(13) |> Nx.subtract(6) |> Nx.divide(120)
w2 = Nx.iota({256, 1}, type: :f32) |> Nx.remainder(7) |> Nx.subtract(3) |> Nx.divide(60)

started =
  for {name, _side, worker_opts, jit_opts, _} <- variants do
    {:ok, pid} = NxJax.Worker.start_link(worker_opts)
    small = Nx.Defn.jit(&Bench.small/1, [server: pid] ++ jit_opts)
    small.(x)
    step = Nx.Defn.jit(&Bench.step/3, [server: pid] ++ jit_opts)
    {rx, ry} = {put_on.(xs, pid), put_on.(ys, pid)}
    state = step.({put_on.(w1, pid), put_on.(w2, pid)}, rx, ry)
    {name, pid, small, fn w -> step.(w, rx, ry) end, state}
  end

spin = Integer.to_string(NxJax.Worker.spin_us())
echo_port = Bench.open_port("bench/port_echo.py", ["--spin-us", spin])
echo_frame = <<"e", 0::64>>

for {name, _pid, _small, _step, state} <- started, do: Process.put({:bench_state, name}, state)

loadavg = fn ->
  case File.read("/proc/loadavg") do
    {:ok, text} -> text |> String.split() |> Enum.take(3) |> Enum.join(" ")
    _ -> "unknown"
  end
end

measure = fn ->
  load = loadavg.()

  calls =
    [echo: fn -> Bench.port_call_polling(echo_port, echo_frame) end] ++
      for {name, _pid, small, _step, _} <- started, do: {name, fn -> small.(x) end}

  rows =
    Bench.interleaved(for({name, f} <- calls, do: {name, &Bench.samples(&1, f)}), n_small, 20)

  # (the BEAM CPU counts start over)
  for {name, _, _, _, _} <- started, do: Bench.step_cpu(name)

  train =
    Bench.interleaved(
      for(
        {name, _pid, _small, step, _} <- started,
        do: {name, &Bench.resident_steps(name, step, &1)}
      ),
      n_mlp,
      20
    )

  # the BEAM's CPU time per training step, in us
  cpu =
    Map.new(started, fn {name, _, _, _, _} ->
      {ms, steps} = Bench.step_cpu(name)
      {name, ms * 1000 / steps}
    end)

  jax = Bench.inprocess(n_small)["scalar"]
  mlp = Bench.mlp_rows(n_mlp)
  %{load: load, rows: rows, train: train, cpu: cpu, jax: jax, mlp: mlp}
end

quiet = measure.()

# the CPU hog: one busy Python process for the whole second measurement
hog =
  Port.open({:spawn_executable, Bench.python()}, [:binary, {:args, ["-c", "while True: pass"]}])

Process.sleep(500)
loaded = measure.()
Bench.close_port(hog)

# pinned: the BEAM, the workers and the echo on one CPU, a CPU-bound process on another
# (Bench.colocated/2; nil where taskset or a second CPU is missing): a worker that may use one
# CPU only cannot move off its caller's
{:os_pid, echo_os} = Port.info(echo_port, :os_pid)

os_pids =
  [System.pid(), echo_os | for({_, pid, _, _, _} <- started, do: NxJax.Worker.os_pid(pid))] ++
    for w <- NxJax.Pool.workers(), do: NxJax.Worker.os_pid(w)

pinned = Bench.colocated(Enum.map(os_pids, &to_string/1), measure)

Bench.close_port(echo_port)
for {_name, pid, _, _, _} <- started, do: GenServer.stop(pid)

conds = [quiet: quiet, hog: loaded] ++ if(pinned, do: [pinned: pinned], else: [])
cond_names = Keyword.keys(conds)
f = fn v, d -> :erlang.float_to_binary(v / 1, decimals: d) end
baseline = fn r -> r.rows.echo.p50 + r.jax.p50 end

what = fn name ->
  if name == :all_on, do: "every mechanism on (the defaults)", else: "without #{label[name]}"
end

head = fn cells -> "| " <> Enum.join(cells, " | ") <> " |" end
rule = fn n -> head.(List.duplicate("---", n)) end

row = fn name ->
  cells =
    for {_c, r} <- conds do
      x = r.rows[name]
      "#{f.(x.p50, 1)} | #{f.(x.p99, 1)} | #{f.(x.p50 / baseline.(r), 2)}"
    end

  "| #{what.(name)} | " <> Enum.join(cells, " | ") <> " |"
end

part_row = fn text, pick ->
  cells =
    Enum.map_join(conds, " | ", fn {_c, r} ->
      "#{f.(pick.(r).p50, 1)} | #{f.(pick.(r).p99, 1)} | "
    end)

  "| #{text} | " <> cells <> "|"
end

# What switching a mechanism off costs, in one condition: {us, % of the row with all on}: row
# `name` minus row `with` (all on, or for a tier the row that leaves it the only fast path).
saving = fn r, key, name, with ->
  us = r[key][name].p50 - r[key][with].p50
  {us, 100 * us / r[key].all_on.p50}
end

# the small call in each condition (what the rule reads), then the training step in each
small_savings = fn name, with -> for {_c, r} <- conds, do: saving.(r, :rows, name, with) end
train_savings = fn name, with -> for {_c, r} <- conds, do: saving.(r, :train, name, with) end

pays? = fn name, with ->
  Enum.any?(small_savings.(name, with), fn {_us, pct} -> pct >= 5 end)
end

cell = fn {us, pct} -> "#{f.(us, 1)} (#{f.(pct, 0)}%)" end

saves_row = fn {name, with, text} ->
  cells = Enum.map(small_savings.(name, with) ++ train_savings.(name, with), cell)
  verdict = if pays?.(name, with), do: "5% or more", else: "**under 5%**"
  "| #{text} | #{side[name] || ""} | #{Enum.join(cells, " | ")} | #{verdict} |"
end

# each row against all on (tier 2 alone serves no small call: tier 1 does; the kept alias and
# the hand decoder serve only calls that the lent port and the learned layouts leave to them),
# and two tiers, the kept alias and the hand decoder each against the row without what serves
# the call before them
saves_rows =
  for(
    name <- names -- [:all_on, :fast_hot, :kept_alias, :decode_fast],
    do: {name, :all_on, label[name]}
  ) ++
    [
      {:fast_one_hot, :fast_one,
       "tier 2, where tier 1 does not serve (row \"tiers 1 and 2\" minus row \"tier 1\")"},
      {:layouts, :fast_one_hot,
       "tier 3 (row \"the learned byte layouts\" minus row \"tiers 1 and 2\")"},
      {:kept_alias, :lent_port,
       "the kept reply alias, where calls go through the GenServer (row \"the kept reply " <>
         "alias and the lent port\" minus row \"the lent port\")"},
      {:decode_fast, :layouts,
       "the hand decoder of small requests, on the generic path (row \"the learned byte " <>
         "layouts and the hand decoder\" minus row \"the learned byte layouts\")"}
    ]

train_row = fn name ->
  "| #{what.(name)} | " <>
    Enum.map_join(conds, " | ", fn {_c, r} ->
      "#{f.(r.train[name].p50, 0)} | #{f.(r.cpu[name], 0)}"
    end) <>
    " |"
end

mlp_row = fn name, text ->
  "| #{text} | " <>
    Enum.map_join(conds, " | ", fn {_c, r} ->
      "#{f.(r.mlp[name].p50, 0)} | #{f.(r.mlp[name].p50 / r.mlp.jax.p50, 2)}"
    end) <> " |"
end

{:ok, now} = DateTime.now("Etc/UTC")
at = Calendar.strftime(now, "%Y-%m-%d %H:%M")
loads = Enum.map_join(conds, "; ", fn {c, r} -> "#{c} #{r.load}" end)

section8 = """
## 8. Latency mechanisms, each on its own, quiet, beside a CPU hog and pinned

`mix run bench/mechanisms.exs #{n_small} #{n_mlp}` (`make bench-mechanisms`), #{at} UTC, on this
#{System.schedulers_online()}-core machine; load average (1, 5, 15 min) as each condition began: #{loads}
(the machine is shared: "quiet" is whatever else ran then). Each row is the small defn of
section 1 on a worker of its own with one mechanism switched off; all rows and the baseline's
echo in 20 interleaved rounds of #{div(n_small, 20)} calls. Conditions: "quiet"; "hog", the same
with one CPU-bound process (`python -c "while True: pass"`) running beside it;#{if pinned, do: " \"pinned\", the BEAM, every worker and the echo pinned to CPU 0 with `taskset` and a CPU-bound process to CPU 1 (a worker that may use one CPU only, beside its caller);", else: ""} each for its whole
duration. Baseline: the polling raw port echo (`bench/port_echo.py --spin-us`, caller
polling) plus the in-process jitted JAX call, both measured in the same condition. Section 9
says what each row switches off and the rule a mechanism is kept by.

#{head.(["small call" | Enum.flat_map(cond_names, &["#{&1} p50 (us)", "p99", "/ baseline"])])}
#{rule.(1 + 3 * length(conds))}
| baseline: echo + in-process JAX | #{Enum.map_join(conds, " | ", fn {_c, r} -> "#{f.(baseline.(r), 1)} | | 1.00" end)} |
#{part_row.("— the polling raw port echo", & &1.rows.echo)}
#{part_row.("— the in-process jitted JAX call", & &1.jax)}
#{Enum.map_join(names, "\n", row)}

The training step of section 3 on the same workers, its weights resident and the old ones
freed each step (#{n_mlp} steps in 20 interleaved rounds; p50 in us), and the BEAM's CPU time
per step (all schedulers, `:erlang.statistics(:runtime)`, in us; its replies come after the
caller's 100 us of polling). A check that nothing slows it: its p50 moves by 15-40% between
workers of the same code from run to run here, far more than the 5% the rule reads.

#{head.(["training step" | Enum.flat_map(cond_names, &["#{&1} p50", "#{&1} BEAM CPU"])])}
#{rule.(1 + 2 * length(conds))}
#{Enum.map_join(names, "\n", train_row)}

What each mechanism saves: p50 without it minus p50 with every mechanism on, in us and as a %
of the latter (negative: it costs); the verdict reads the small call's columns:

#{head.(["switched off", "side" | Enum.map(cond_names, &"small call, #{&1}") ++ Enum.map(cond_names, &"training step, #{&1}") ++ ["the most the small call saves"]])}
#{rule.(3 + 2 * length(conds))}
#{Enum.map_join(saves_rows, "\n", saves_row)}

MLP step of section 3 on the pool's default worker (#{n_mlp} steps in 4 interleaved rounds; p50 in us):

#{head.(["" | Enum.flat_map(cond_names, &["#{&1}", "/ in-process JAX"])])}
#{rule.(1 + 2 * length(conds))}
#{mlp_row.(:jax, "in-process JAX (bench/inprocess.py)")}
#{mlp_row.(:resident, "nx_jax, resident weights")}
#{mlp_row.(:shipped, "nx_jax, weights shipped each step")}
"""

under = for {name, with, text} <- saves_rows, side[name], not pays?.(name, with), do: text

late_cpu =
  Enum.map_join(conds, ", ", fn {_c, r} ->
    us = r.cpu.late_replies - r.cpu.all_on
    "#{f.(us, 0)} us (#{f.(100 * us / r.cpu.all_on, 0)}%)"
  end)

section9 = """
## 9. Reading the latency mechanisms table

Written by `make bench-mechanisms` with section 8 (#{at} UTC). What each row of section 8
switches off:

- **The caller's reply polling** (`NxJax.Worker.Caller`): after sending a request the caller
  polls its mailbox for `reply_spin_us` (100 us) before it sleeps in `receive`; a sleeping
  BEAM process wakes tens of microseconds late on a virtual machine.
- **The lent port** (`NxJax.Worker.LentPort`): the port is connected to the calling process
  for the call, so the request and the reply skip the worker's GenServer.
- **The suspended keeper** (`NxJax.Worker.Keeper`): the port's connected process at rest, kept
  suspended, so that the port's answer to a borrower's connect (sent to the port's previous
  owner) wakes no process; without it the port rests with the GenServer.
- **The kept reply alias** (`NxJax.Worker.Caller`): a call through the GenServer is answered at
  an alias the process keeps from call to call, not one made and removed per call. Only calls
  that do not borrow the port take it (the training step's, whose results stay resident, do).
- **A poll's time slice** (`NxJax.Worker.Caller`, `:erlang.bump_reductions/1`): each poll of a
  polling caller counts a whole time slice, so that its scheduler checks the port's pollset
  soon and other processes run as after a yield.
- **The count of late replies** (`NxJax.Worker.Caller`): a process whose replies came after its
  polling twice in a row stops polling (trying again every 16th call), where polling would
  only take a scheduler from other processes.
- **The plans of repeated jitted calls** (`Nx.Defn.Compiler`, "Planned calls", the front end's
  own): from the third call of one signature a process follows its plan straight to the
  compiler's `__run__/5`, past the options' merge, the signature and the trace cache's lookup.
- **The worker's spin** (`py_backend.channel.FrameReader`, `spin_us`): after a reply the worker
  polls its pipe for `spin_us` (100 us) before it sleeps.
- **The spin's pause** (`py_backend.channel.SpinPause`): a spin that lost its CPU (another task
  ran there) and cannot move, or loses it again within a millisecond, stops, and the next 8 to
  256 reads block at once: what keeps a worker that may use one CPU only from taking turns
  with its polling caller on it ("pinned").
- **The spin's move** (`SpinPause.may_move`, `move_off_this_cpu`): a spin that lost its CPU
  moves its thread to another CPU and spins on there, at most once a millisecond.
- **The fast tiers** of a repeated `call` (py_backend/fastcall.py, `py_backend.request_loop.RequestLoop`):
  tier 1 (`RequestLoop._hot_one`) serves one tensor in and one small one out with the whole reply
  frame built in one function; tier 2 (`RequestLoop._hot_path`) tests the frame against the layout
  served last; tier 3 (`fastcall.Layouts.match`) looks the frame's learned byte layout up. A
  row that switches a tier off leaves the tiers below it to serve the call; the learned
  layouts off, every request is decoded and checked the generic way. Tier 1 serves the small
  call whole, so the row that switches tier 2 alone off shows only that (its calls that keep
  their results, as the training step's, never take tier 1); the savings table measures tiers
  2 and 3 on the small call as the tier that serves it when those above are off.
- **The hand decoder of small requests** (`py_backend.channel.decode_fast`): on the generic
  path (a request no learned layout serves), a request frame under 1 MB is read by a decoder
  of the few tags requests use, not by erlang-py's.
- **A call's results released after its reply** (`RequestLoop.spent`): their buffers are freed once
  the reply is written, not before.

The rule: a mechanism stays while it saves 5% or more of the small call in at least one
condition; one that saves less in every condition, in two runs, is removed with its switch
(one run's p50 moves by a few % by chance). A mechanism that serves only calls another one
leaves to it (a tier, the kept alias, the hand decoder) is read where it serves: its row minus
the row without what serves the call before it. This run: #{if under == [], do: "every mechanism saved 5% or more in some condition", else: "under 5% in every condition: " <> Enum.join(under, "; ")}.
One under 5% stays where taking it out makes something else measurably worse: the count of
late replies is for calls whose replies come after the polling, as the training step's, and
without it the BEAM spent #{late_cpu} of its CPU time per training step more (quiet, hog, pinned;
column "BEAM CPU" above) than with it. One run's "under 5%" is no verdict: the commits that
regenerate these sections say what the runs before them found, and what was removed;
`mix run bench/mechanism_pairs.exs NAME` is the paired check of one Elixir-side mechanism.
Ratios move from run to run on this shared machine (the baseline's echo alone by 2x beside the
hog); differences within one run are what count. Removed under this rule, each in a commit
that gives its figures: the release of freed arrays between calls and a paused spin's move to
an idle CPU (`git log py_backend`).

Not latency mechanisms, so with no switch of their own: the parts of the lent port that keep
`NxJax.Worker.Lease`'s invariants, taken out only with the whole lent port (`lend_port: false`):

- **The lock, an `:atomics` holding the borrower's packed pid**: only its holder writes to
  the port (invariant 1), and the pid in it is whom the GenServer monitors, to take the port
  back from a borrower that died holding it (invariant 4).
- **The held-back frames**: requests the GenServer gets while a borrower holds the port wait
  for it, in the order they came (invariants 1 and 3): written at once, their replies would
  reach the borrower or the keeper, not the GenServer.
- **The stale ids**: the reply to the call of a borrower that died reaches the GenServer,
  which drops it as expected instead of logging a reply to no request; no call that completes
  takes that path.
"""

BenchSection.replace!(8, section8)
BenchSection.replace!(9, section9)
IO.puts(section8)
IO.puts(section9)
