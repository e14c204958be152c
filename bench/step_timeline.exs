# Where a training step's time goes: the step of bench/train_loop.exs (bench/train_step.exs)
# timed at each hand-over between the calling process, the worker's GenServer, the port and
# the Python worker, on one clock (NxJax.Timeline, py_backend/timeline.py); writes section 15
# of docs/BENCHMARKS.md.
#
#     NX_JAX_TIMELINE=1 mix run bench/step_timeline.exs [STEPS] [ROUNDS]     (make bench-timeline)
#
# The marks exist only in a build made with NX_JAX_TIMELINE=1 (the modules that hold them
# recompile when it changes; a normal build has none). Each of ROUNDS rounds runs STEPS steps
# of the loop in blocks of 20, alternating with blocks of its twin's (bench/train_loop.py
# serve, in-process JAX), so that the two are timed in the same seconds; then, in the same
# minutes, the step with a normal worker (no timeline) and the step served over the same pipes
# but driven by a minimal Python client instead of the BEAM (bench/pipe_floor.py), each in
# blocks alternating with the twin's.
Code.require_file("lib.exs", __DIR__)
Code.require_file("train_step.exs", __DIR__)
Code.require_file("section.exs", __DIR__)

defmodule StepTimeline do
  # What each hand-over of a step is, by the marks that bound it (in the order a step passes
  # them). Python's `request` and `kept` rows (py_backend/timeline.py) become marks too.
  @segments [
    {:step, :caller_sent, "the caller: the jitted function's plan, the request built"},
    {:caller_sent, :server_request, "the request's message to the worker's GenServer"},
    {:server_request, :server_write, "the GenServer: the frame made, the port's lease"},
    {:server_write, :server_written, "the frame written to the pipe (`Port.command`)"},
    {:server_written, :py_read, "the worker reads it (woken, or polling)"},
    {:py_read, :kept_start, "the worker finds the call's runner (`py_backend/fastcall.py`)"},
    {:kept_start, :kept_dispatched, "the arguments looked up, the run dispatched to XLA"},
    {:kept_dispatched, :kept_ready, "XLA computes"},
    {:kept_ready, :kept_kept, "14 results kept, the 5 small ones copied"},
    {:kept_kept, :kept_encoded, "the reply encoded"},
    {:kept_encoded, :py_handled, "(the runner returns)"},
    {:py_handled, :py_written, "the reply written to the pipe"},
    {:py_written, :server_data, "the GenServer gets it (the BEAM woken)"},
    {:server_data, :server_replied, "the GenServer: the reply decoded, 14 guards made"},
    {:server_replied, :caller_replied, "the reply's message to the caller"},
    {:caller_replied, :step_returned, "the caller: result tensors built"},
    {:step_returned, :step_end, "`Nx.to_number(loss)` (its copy came with the reply)"}
  ]

  def segments, do: @segments

  # the loop runs in blocks of this many steps, alternating with the twin's
  @block 20
  def block, do: @block

  # The marks of each step, from one :step mark to the next: Elixir's, and the Python rows
  # converted (request: py_read, py_handled, py_written; kept: kept_*).
  def steps(marks, rows) do
    python =
      Enum.flat_map(rows, fn
        ["request", read, handled, written, _size] ->
          [{read, :py_read}, {handled, :py_handled}, {written, :py_written}]

        ["kept" | stamps] ->
          Enum.zip(stamps, [:kept_start, :kept_dispatched, :kept_ready, :kept_kept, :kept_encoded])
      end)

    {first, _} = hd(marks)
    {last, _} = List.last(marks)
    events = Enum.sort(marks ++ Enum.filter(python, fn {t, _} -> t >= first and t <= last end))

    events
    |> Enum.chunk_while(
      [],
      fn
        {_, :step} = e, [] -> {:cont, [e]}
        {_, :step} = e, acc -> {:cont, Enum.reverse(acc), [e]}
        e, [] -> {:cont, [e]}
        e, acc -> {:cont, [e | acc]}
      end,
      fn acc -> {:cont, Enum.reverse(acc), []} end
    )
    |> Enum.filter(&match?([{_, :step} | _], &1))
  end

  # (nil for no values)
  defp median(values), do: TrainLoop.p50(values)

  # {segment medians of the steps that passed every mark of @segments once, in order; how
  # many steps those were; the step's period (start to next start); the part of the period
  # outside the run (period less dispatch and computing, the twin's work too); and how many
  # requests other than the step's call came per step (other_requests/2 times them); the
  # last step of each block of @block has no period (the twin's block follows it)}
  def analyse(steps) do
    order = Enum.flat_map(@segments, fn {a, _, _} -> [a] end) ++ [:step_end]

    plain =
      for step <- steps, Enum.map(step, &elem(&1, 1)) == order do
        Map.new(step, fn {t, tag} -> {tag, t} end)
      end

    medians =
      for {a, b, _} <- @segments, into: %{} do
        {{a, b}, median(Enum.map(plain, &((&1[b] - &1[a]) / 1000)))}
      end

    periods =
      Enum.zip(steps, tl(steps))
      |> Enum.reject(fn {step, _next} -> Enum.any?(step, &(elem(&1, 1) == :block_end)) end)
      |> Enum.map(fn {[{t0, _} | _] = step, [{t1, _} | _]} ->
        tags = Map.new(step, fn {t, tag} -> {tag, t} end)
        others = Enum.count(step, &(elem(&1, 1) == :py_read)) - 1

        run =
          if tags[:kept_ready] && tags[:kept_start],
            do: (tags[:kept_ready] - tags[:kept_start]) / 1000

        # (a request read before the step's own call, between its start and its run: a free
        # the call waited behind)
        ahead =
          case Enum.find(step, &(elem(&1, 1) == :kept_start)) do
            {start, _} -> Enum.count(step, &(elem(&1, 1) == :py_read and elem(&1, 0) < start)) > 1
            nil -> false
          end

        {(t1 - t0) / 1000, run, others, ahead}
      end)

    %{
      medians: medians,
      plain: length(plain),
      steps: length(steps),
      period: median(Enum.map(periods, &elem(&1, 0))),
      outside: median(for {p, r, _, _} <- periods, r != nil, do: p - r),
      run: median(for {_, r, _, _} <- periods, r != nil, do: r),
      others: Enum.sum(Enum.map(periods, &elem(&1, 2))) / max(length(periods), 1),
      ahead: Enum.count(periods, &elem(&1, 3)) / max(length(periods), 1),
      period_ahead: median(for {p, _, _, true} <- periods, do: p),
      period_clear: median(for {p, _, 0, false} <- periods, do: p)
    }
  end

  def run_round(steps) do
    dir = Path.join(System.tmp_dir!(), "nx_jax_timeline_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    Bench.restart_pool(1, [[{"NX_JAX_TIMELINE_FILE", Path.join(dir, "worker")}]])

    {marks, twin} =
      Task.async(fn ->
        # (the step made and its first 20 steps run, not recorded; the twin's blocks alternate
        # with the loop's, so both run in the same seconds)
        twin = TrainLoop.twin_server()
        {step, state, batches, _worker} = TrainLoop.setup([])
        :ok = NxJax.Timeline.start()

        twin_times =
          try do
            {_state, times} =
              Enum.reduce(Enum.chunk_every(1..steps, @block), {state, []}, fn block, {state, t} ->
                {theirs, _losses} = TrainLoop.twin_block(twin, length(block))

                state =
                  Enum.reduce(block, state, fn i, state ->
                    {x, y} = elem(batches, rem(i, 4))
                    NxJax.Timeline.record(:step)
                    {state, loss} = step.(state, x, y)
                    NxJax.Timeline.record(:step_returned)
                    _ = Nx.to_number(loss)
                    NxJax.Timeline.record(:step_end)
                    state
                  end)

                # (the last step of a block is followed by the twin's next block: no period)
                NxJax.Timeline.record(:block_end)
                {state, [theirs | t]}
              end)

            List.flatten(times)
          after
            Port.close(twin)
          end

        {NxJax.Timeline.stop(), twin_times}
      end)
      |> Task.await(:infinity)

    # (the worker writes its rows when it exits)
    Bench.restart_pool(1, [[]])
    [file] = File.ls!(dir)

    rows =
      Path.join(dir, file)
      |> File.read!()
      |> String.split("\n", trim: true)
      |> Enum.map(fn line ->
        [kind | numbers] = String.split(line, " ")
        [kind | Enum.map(numbers, &String.to_integer/1)]
      end)

    File.rm_rf!(dir)

    analyse(steps(marks, rows))
    |> Map.put(:twin, TrainLoop.p50(twin))
    |> Map.merge(other_requests(marks, rows))
  end

  @doc """
  bench/pipe_floor.py's run of `blocks` blocks: the step served by a worker process over its
  pipes, driven by a minimal Python client (no BEAM), against the twin in alternating blocks.
  The step's graph is the one this VM's loop sent (the largest the clean room traced).
  """
  def pipe_floor(blocks) do
    graph = TrainLoop.step_graph()
    file = Path.join(System.tmp_dir!(), "nx_jax_pipe_floor_#{System.unique_integer([:positive])}")
    File.write!(file, graph)

    try do
      out =
        Bench.sh(Bench.python(), [
          Path.join(__DIR__, "pipe_floor.py"),
          file,
          "#{blocks}",
          "#{NxJax.Worker.Server.default_numerics()}",
          "#{NxJax.Worker.Config.spin_us()}"
        ])

      line = out |> String.split("\n") |> List.last()

      for key <- ~w(ours twin ratio client_us), into: %{} do
        [_, value] = Regex.run(~r/"#{key}": ([\d.]+)/, line)
        {String.to_atom(key), Float.parse(value) |> elem(0)}
      end
    after
      File.rm(file)
    end
  end

  # The requests other than the step's calls (frees) while the steps ran: the medians of their
  # handling (read to reply made) and of their reply's write, in us.
  def other_requests(marks, rows) do
    {first, _} = hd(marks)
    {last, _} = List.last(marks)
    kept = for ["kept", start | _] <- rows, do: start

    others =
      for ["request", read, handled, written, _size] <- rows,
          read >= first and written <= last,
          not Enum.any?(kept, &(&1 >= read and &1 <= handled)),
          do: {(handled - read) / 1000, (written - handled) / 1000}

    %{
      other_handling: median(Enum.map(others, &elem(&1, 0))),
      other_write: median(Enum.map(others, &elem(&1, 1)))
    }
  end
end

unless NxJax.Timeline.compiled_in?() do
  raise "bench/step_timeline.exs needs the timeline's marks: run it as " <>
          "`NX_JAX_TIMELINE=1 mix run bench/step_timeline.exs` (make bench-timeline)"
end

{steps, rounds} =
  case System.argv() do
    [steps, rounds] -> {String.to_integer(steps), String.to_integer(rounds)}
    [steps] -> {String.to_integer(steps), 3}
    [] -> {500, 3}
  end

results =
  for _ <- 1..rounds do
    timed = StepTimeline.run_round(steps)
    # the same step in the same minutes with a normal worker (no timeline), and with no BEAM
    # (bench/pipe_floor.py), each against its twin in alternating blocks
    Bench.restart_pool(1, [[]])
    normal = TrainLoop.interleaved(div(steps, 20), 20)
    floor = StepTimeline.pipe_floor(div(steps, 20))
    Map.merge(timed, %{normal: TrainLoop.p50(normal.ratios), floor: floor})
  end

fmt = fn
  nil -> "-"
  us -> :erlang.float_to_binary(us / 1, decimals: 1)
end

table =
  for {a, b, what} <- StepTimeline.segments() do
    cells = Enum.map_join(results, " | ", &fmt.(&1.medians[{a, b}]))
    "| `#{a}` → `#{b}` | #{what} | #{cells} |"
  end

sum_line =
  Enum.map_join(results, " | ", fn r ->
    fmt.(r.medians |> Map.values() |> Enum.reject(&is_nil/1) |> Enum.sum())
  end)

header = Enum.map_join(1..rounds, " | ", &"round #{&1}")
rule = Enum.map_join(1..rounds, "", fn _ -> " --- |" end)
line = fn key -> Enum.map_join(results, ", ", &fmt.(Map.fetch!(&1, key))) end

r2 = fn x -> :erlang.float_to_binary(x / 1, decimals: 2) end

ratios = fn key ->
  Enum.map_join(
    results,
    ", ",
    &:erlang.float_to_binary(Map.fetch!(&1, key) / &1.twin, decimals: 2)
  )
end

section = """
## 15. Where a training step's time goes

`make bench-timeline` (`NX_JAX_TIMELINE=1 mix run bench/step_timeline.exs #{steps} #{rounds}`)
writes this section. The step is section 12's (the MLP's Adam step, its state resident, the
loss read back), #{steps} steps a round after 20 uncounted, in blocks of #{StepTimeline.block()} alternating
with blocks of its twin's (`bench/train_loop.py serve`, the same step jitted in-process in
JAX), so that both are timed in the same seconds; each hand-over between the calling
process, the worker's GenServer, the pipe and the Python worker is timed on one clock
(`NxJax.Timeline`, `py_backend/timeline.py`: marks compiled in only by `NX_JAX_TIMELINE=1`).
Medians in us over the steps that passed every mark once, in this order: #{Enum.map_join(results, ", ", & &1.plain)} of
the #{steps} of each round (the others had a `free` of earlier results in between, a mark
twice, or ended a block).
The timeline's worker waits for the run to finish before it keeps the results; a normal worker
keeps them while XLA computes. #{Bench.cpu_model()}, #{Date.utc_today()}:

| from → to | what | #{header} |
| --- | --- |#{rule}
#{Enum.join(table, "\n")}
| | sum of the medians | #{sum_line} |

The step's period (one step's start to the next's), median: #{line.(:period)} us; of it
outside the run (the period less the run from its arguments' lookup to its end, the twin's
work too): #{line.(:outside)} us. Other requests (frees of collected results) per step:
#{Enum.map_join(results, ", ", &:erlang.float_to_binary(&1.others, decimals: 2))}, each handled in #{line.(:other_handling)} us and its reply
written in #{line.(:other_write)} us (medians). Steps whose call was read after such a
request, which it then waited behind: #{Enum.map_join(results, ", ", &"#{round(&1.ahead * 100)}%")} of them, their period
#{line.(:period_ahead)} us against #{line.(:period_clear)} for the steps with no other request.

The twin's step (in-process JAX, `float(loss)` included), median over its blocks: #{line.(:twin)} us.
Against it, the loop's period: #{ratios.(:period)} times; the run alone in the worker (from
its arguments' lookup to its end, the timeline's worker waiting for it): #{line.(:run)} us,
#{ratios.(:run)} times.

The same step in the same minutes, each against its twin in alternating blocks of 20 (the
median of the blocks' ratios): with a normal worker (no timeline) #{Enum.map_join(results, ", ", &r2.(&1.normal))} times; and served by a
worker process over the same pipes but driven by a minimal Python client instead of the BEAM
(`bench/pipe_floor.py`: the request spliced from a template, the reply decoded, the results
freed every other step; its own work #{Enum.map_join(results, ", ", &fmt.(&1.floor.client_us))} us a step), #{Enum.map_join(results, ", ", &r2.(&1.floor.ratio))} times:
no better than the BEAM's: what keeps the step above the in-process one is the pipes' two
crossings and the worker's own handling, not the Elixir side.
"""

BenchSection.replace!(15, section)
IO.puts(section)
