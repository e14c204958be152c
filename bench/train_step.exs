# The training step of bench/train_loop.exs and bench/real_nx.exs, as an Nx user writes it,
# under whichever Nx the build has (the clean room, or real Nx 0.7.2 with NxJax as its
# compiler): a 784-128-10 MLP (relu, softmax cross-entropy) trained with Adam on batches of
# 128, its state resident through `Nx.default_backend(NxJax.Backend)`, the loss read back
# after every step; and its Python twin (bench/train_loop.py). Needs bench/lib.exs.
defmodule TrainLoop do
  import Nx.Defn
  import Bitwise, only: [<<<: 2]

  @b1 0.9
  @b2 0.999
  @lr 1.0e-3
  @eps 1.0e-8

  defn loss({w1, c1, w2, c2}, x, y) do
    h = Nx.max(Nx.dot(x, w1) + c1, 0.0)
    logits = Nx.dot(h, w2) + c2
    shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
    logp = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
    -Nx.mean(Nx.sum(y * logp, axes: [1]))
  end

  defn step({params, m, v, t}, x, y) do
    {loss, g} = value_and_grad(params, &loss(&1, x, y))
    t = t + 1
    tf = Nx.as_type(t, :f32)
    {p1, m1, v1} = adam(elem(params, 0), elem(g, 0), elem(m, 0), elem(v, 0), tf)
    {p2, m2, v2} = adam(elem(params, 1), elem(g, 1), elem(m, 1), elem(v, 1), tf)
    {p3, m3, v3} = adam(elem(params, 2), elem(g, 2), elem(m, 2), elem(v, 2), tf)
    {p4, m4, v4} = adam(elem(params, 3), elem(g, 3), elem(m, 3), elem(v, 3), tf)
    {{{p1, p2, p3, p4}, {m1, m2, m3, m4}, {v1, v2, v3, v4}, t}, loss}
  end

  defnp adam(p, g, m, v, tf) do
    m = @b1 * m + (1 - @b1) * g
    v = @b2 * v + (1 - @b2) * g * g
    mhat = m / (1 - @b1 ** tf)
    vhat = v / (1 - @b2 ** tf)
    {p - @lr * mhat / (Nx.sqrt(vhat) + @eps), m, v}
  end

  # the formulas of bench/train_loop.py's initial/1
  def grid(rows, cols, mod, scale) do
    Nx.iota({rows, cols}, type: :s64)
    |> Nx.remainder(mod)
    |> Nx.subtract(div(mod, 2))
    |> Nx.multiply(scale)
    |> Nx.as_type(:f32)
  end

  def initial do
    params =
      {grid(784, 128, 13, 0.01), Nx.broadcast(0.0, {128}), grid(128, 10, 7, 0.05),
       Nx.broadcast(0.0, {10})}

    zeros = Nx.Defn.Composite.traverse(params, &Nx.multiply(&1, 0.0))
    state = {params, zeros, zeros, Nx.tensor(0, type: :s32)}

    batches =
      for b <- 0..3 do
        x =
          Nx.iota({128, 784}, type: :s64)
          |> Nx.multiply(b + 3)
          |> Nx.remainder(255)
          |> Nx.as_type(:f32)
          |> Nx.divide(255)

        labels = Nx.iota({128}, type: :s64) |> Nx.multiply(b + 1) |> Nx.remainder(10)
        y = Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 10}, type: :s64)) |> Nx.as_type(:f32)
        {x, y}
      end

    {state, batches}
  end

  @doc """
  Runs `steps` steps in a process of its own (as a user's loop would be): each step's time in
  us, every 100th loss, the worker's `{step, rss_mb, resident}` at `probe_at` steps, and the
  CPU seconds the worker and this VM used per step. Options: `:probe_at`, `:donate` and
  `:compiler` (of the jit), `:compile` (true: `Nx.Defn.compile/3` instead of `Nx.Defn.jit/2`).
  """
  def run(steps, opts \\ []) do
    Task.async(fn -> loop(steps, opts) end) |> Task.await(:infinity)
  end

  defp loop(steps, opts) do
    {step, state, batches, worker} = setup(opts)
    probe_at = Keyword.get(opts, :probe_at, [])
    os_pid = NxJax.Worker.os_pid(worker)
    cpu0 = {Bench.cpu_s(os_pid), Bench.cpu_s(System.pid())}
    {_state, times, losses, probes} = steps(step, state, batches, 1..steps, worker, probe_at)
    {worker_cpu, vm_cpu} = cpu0

    %{
      times: times,
      losses: losses,
      probes: probes,
      worker_cpu_us: (Bench.cpu_s(os_pid) - worker_cpu) / steps * 1.0e6,
      vm_cpu_us: (Bench.cpu_s(System.pid()) - vm_cpu) / steps * 1.0e6
    }
  end

  @doc """
  In the calling process: the jitted (or compiled) step, the state and batches made resident,
  20 steps run (they compile: not counted), and the pool's one worker. Options as `run/2`'s.
  """
  def setup(opts) do
    Nx.default_backend(NxJax.Backend)
    {state, batches} = initial()
    step_opts = Keyword.take(opts, [:donate, :compiler])

    # `compile: true`: through `Nx.Defn.compile/3` (traced once, before the loop), else
    # through `Nx.Defn.jit/2` (its compiler called at every step)
    step =
      if opts[:compile] do
        [{x, y} | _] = batches
        Nx.Defn.compile(&step/3, Enum.map([state, x, y], &Nx.to_template/1), step_opts)
      else
        Nx.Defn.jit(&step/3, step_opts)
      end

    state = Nx.backend_transfer(state, NxJax.Backend)
    batches = batches |> Enum.map(&Nx.backend_transfer(&1, NxJax.Backend)) |> List.to_tuple()
    [worker] = NxJax.Pool.workers()
    # (the first steps compile: not counted)
    state =
      Enum.reduce(0..19, state, fn i, s ->
        {x, y} = elem(batches, rem(i, 4))
        elem(step.(s, x, y), 0)
      end)

    {step, state, batches, worker}
  end

  # Runs the steps numbered `range`: the state after them, each step's time in us, every
  # 100th loss, and the probes of `probe_at`.
  defp steps(step, state, batches, range, worker, probe_at) do
    {state, times, losses, probes} =
      Enum.reduce(range, {state, [], [], []}, fn i, {state, times, losses, probes} ->
        {x, y} = elem(batches, rem(i, 4))
        t0 = System.monotonic_time(:nanosecond)
        {state, loss} = step.(state, x, y)
        value = Nx.to_number(loss)
        us = (System.monotonic_time(:nanosecond) - t0) / 1000
        losses = if rem(i, 100) == 0, do: [value | losses], else: losses
        probes = if i in probe_at, do: [{i, probe(worker)} | probes], else: probes
        {state, [us | times], losses, probes}
      end)

    {state, Enum.reverse(times), Enum.reverse(losses), Enum.reverse(probes)}
  end

  @doc """
  The loop and its twin in alternation, `rounds` blocks of `block` steps each, the twin's
  block first in each round: the twin is a Python process of its own
  (`bench/train_loop.py serve`) kept between its blocks, so both run in the same minutes,
  a host whose speed changes from one minute to the next changing both. Options as
  `run/2`'s. Returns `%{ours: times, twin: times, ratios: ratios, losses: losses,
  twin_losses: losses}`: every step's time in us, each round's ratio of the two blocks'
  medians, and every 100th step's loss of each.
  """
  def interleaved(rounds, block, opts \\ []) do
    Task.async(fn ->
      # (the port's lines come to the process that opened it: this task)
      twin = twin_server()

      try do
        {step, state, batches, worker} = setup(opts)

        {_state, rows} =
          Enum.reduce(1..rounds, {state, []}, fn round, {state, rows} ->
            {theirs, their_losses} = twin_block(twin, block)
            first = (round - 1) * block + 1

            {state, ours, losses, _} =
              steps(step, state, batches, first..(first + block - 1), worker, [])

            {state, [{ours, theirs, losses, their_losses} | rows]}
          end)

        rows = Enum.reverse(rows)

        %{
          ours: Enum.flat_map(rows, &elem(&1, 0)),
          twin: Enum.flat_map(rows, &elem(&1, 1)),
          ratios: Enum.map(rows, fn {ours, theirs, _, _} -> p50(ours) / p50(theirs) end),
          losses: Enum.flat_map(rows, &elem(&1, 2)),
          twin_losses: Enum.flat_map(rows, &elem(&1, 3))
        }
      after
        Port.close(twin)
      end
    end)
    |> Task.await(:infinity)
  end

  @doc """
  The twin of `interleaved/3`, `bench/train_loop.py serve`, started and ready (its step
  compiled and warmed): a port whose lines come to the calling process. `twin_block/2` runs
  its next steps; `Port.close/1` ends it.
  """
  def twin_server do
    port =
      Port.open({:spawn_executable, Bench.python()}, [
        :binary,
        {:line, 1 <<< 20},
        args: [Path.join(__DIR__, "train_loop.py"), "serve"]
      ])

    {:ok, _} = twin_line(port)
    port
  end

  @doc "Runs `steps` more steps of the twin: their times in us and every 100th step's loss."
  def twin_block(port, steps) do
    Port.command(port, "#{steps}\n")
    {:ok, line} = twin_line(port)
    [_, list] = Regex.run(~r/"step_us": \[([^\]]*)\]/, line)
    [_, losses] = Regex.run(~r/"losses": \[([^\]]*)\]/, line)
    {floats(list), floats(losses)}
  end

  defp twin_line(port) do
    receive do
      {^port, {:data, {:eol, line}}} -> {:ok, line}
    after
      600_000 -> raise "bench/train_loop.py serve gave no line in 10 minutes"
    end
  end

  defp probe(worker) do
    %{rss: rss} = NxJax.Worker.call(:memory, [false], server: worker)
    %{resident: resident} = NxJax.Worker.stats(server: worker)
    {Float.round(rss / 1_048_576, 1), resident}
  end

  @doc "The twin's run: each step's time, every 100th loss, its CPU per step (us)."
  def twin(mode, steps) do
    out = Bench.sh(Bench.python(), [Path.join(__DIR__, "train_loop.py"), mode, "#{steps}"])
    [_, list] = Regex.run(~r/"step_us": \[([^\]]*)\]/, out)
    [_, losses] = Regex.run(~r/"losses": \[([^\]]*)\]/, out)
    [_, cpu] = Regex.run(~r/"cpu_us": ([\d.e+-]+)/, out)
    %{times: floats(list), losses: floats(losses), cpu_us: String.to_float(cpu)}
  end

  defp floats(""), do: []
  defp floats(text), do: text |> String.split(", ") |> Enum.map(&String.to_float/1)

  @doc """
  The step's graph as the clean room sent it (a binary): the largest graph in its trace cache,
  `Nx.Defn.Compiler`'s persistent terms, once the step has run in this VM.
  """
  def step_graph do
    {graph, _key} =
      for(
        {{Nx.Defn.Compiler, _, _}, {entry, _used}} <- :persistent_term.get(),
        is_tuple(entry) and elem(entry, 0) == :graph,
        do: elem(entry, 1)
      )
      |> Enum.max_by(fn {graph, _key} -> byte_size(graph) end)

    graph
  end

  @doc "A jitted chain of `ops` element-wise ops (multiply, add, sin) on 2 f32 values."
  def chain(ops) do
    fn x ->
      Enum.reduce(1..div(ops, 3), x, fn _, a -> Nx.sin(Nx.add(Nx.multiply(a, 1.0001), 0.5)) end)
    end
  end

  def p50(times), do: times |> Bench.percentiles() |> Map.fetch!(:p50)

  def medians(times), do: times |> Enum.chunk_every(100) |> Enum.map(&Float.round(p50(&1), 0))
end
