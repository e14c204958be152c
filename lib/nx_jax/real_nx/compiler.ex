defmodule NxJax do
  @moduledoc """
  nx_jax's compiler under real Nx 0.7.2 (Nx from hex): an `Nx.Defn.Compiler`, as EXLA is.

      config :nx, default_defn_options: [compiler: NxJax]

  or `Nx.Defn.jit(fun, compiler: NxJax)` runs `defn` code on the JAX worker. Real Nx traces
  (and differentiates) the function; this module writes the expression as the wire graph
  (`NxJax.WireEncoder`), keeps it by the call's key and argument signature, and runs it on the
  pool (`NxJax.Pool`, `NxJax.Worker.run_cached/5`: the graph travels to a worker once, its key
  afterwards). Arguments travel as their bytes, or as handles to the worker that holds them
  (`NxJax.Backend`); results stay resident there when an argument was or the caller's default
  backend is `NxJax.Backend`, and come back as `Nx.BinaryBackend` tensors otherwise.

  Real Nx calls `__jit__/5` on every call of a jitted function and leaves the reuse of traces
  to its compiler: the first call with a signature traces and encodes, later ones look the
  graph up in `NxJax.TraceCache` (at most `config :nx_jax, trace_cache_size:` traces, the
  least used evicted first; `trace_cache_stats/0`) and only run it.

  Under the clean-room Nx of this repository the module `NxJax` is lib/nx_jax.ex instead
  (mix.exs chooses the file by which Nx it builds against).
  """

  @behaviour Nx.Defn.Compiler

  alias Nx.Defn.Composite
  alias Nx.Tensor, as: T

  # options read by the run (the rest belong to Nx or to other compilers, and are ignored)
  @run_options [:server, :timeout, :debug_nans]

  @doc """
  The platform, the device and all the devices of a worker, as JAX names them
  (`NxJax.Devices.list/1`).
  """
  defdelegate devices(opts \\ []), to: NxJax.Devices, as: :list

  @doc """
  The trace cache's capacity and counts (`NxJax.TraceCache.stats/0`): `%{size:, entries:,
  traces:, hits:, evictions:}`.
  """
  defdelegate trace_cache_stats(), to: NxJax.TraceCache, as: :stats

  @impl true
  def __jit__(key, vars, fun, args_list, opts) do
    __compile__(key, vars, fun, opts).(args_list)
  end

  @impl true
  def __compile__(key, vars, fun, opts) do
    entry = entry(key, vars, fun)
    run_opts = run_options(entry, opts)

    run_opts =
      case donated(Keyword.get(opts, :donate), vars, entry) do
        [] -> run_opts
        donated -> [{:donated, donated} | run_opts]
      end

    fn args_list -> Enum.map(args_list, &run(entry, &1, run_opts)) end
  end

  # `donate: [position]`, positions (0-based) of the call's tensor and container arguments
  # (real Nx passes its compiler those, not the call's other arguments, such as options): the
  # positions among the tensors the graph reads (`entry.parameters`) of every leaf of each
  # donated argument, the candidates whose memory the results may reuse.
  defp donated(nil, _vars, _entry), do: []

  defp donated(positions, vars, entry) do
    count = length(vars)

    unless is_list(positions) and
             Enum.all?(positions, &(is_integer(&1) and &1 in 0..(count - 1)//1)) do
      raise ArgumentError,
            "the :donate option takes a list of argument positions (0-based) of the call's " <>
              "#{count} tensor or container argument(s), got: #{inspect(positions)}"
    end

    {ranges, _} =
      Enum.map_reduce(vars, 0, fn var, first ->
        leaves = Composite.count(var)
        {first..(first + leaves - 1)//1, first + leaves}
      end)

    leaves = MapSet.new(Enum.flat_map(positions, &Enum.at(ranges, &1)))

    for {leaf, i} <- Enum.with_index(entry.parameters), leaf in leaves, do: i
  end

  defp run_options(entry, opts) do
    run_opts = Keyword.take(opts, @run_options)

    case on_hook(entry.hooks, Keyword.get(opts, :hooks) || %{}) do
      nil -> run_opts
      on_hook -> [{:on_hook, on_hook} | run_opts]
    end
  end

  # Each input sent runs the step `fun` once (traced once), on the input, the accumulator so
  # far and the other arguments, in a stream process (`NxJax.Stream`).
  @impl true
  def __stream__(key, input, acc, vars, fun, [args], opts) do
    entry = entry({:stream, key}, vars, fun)
    run_opts = run_options(entry, opts)
    rest = Enum.drop(args, Composite.count(input) + Composite.count(acc))
    {output, _acc} = entry.template

    [
      NxJax.Stream.start_link(input, output, acc, fn input_args, acc ->
        acc_args = for t <- Composite.flatten_list([acc]), do: fn -> t end
        run(entry, input_args ++ acc_args ++ rest, run_opts)
      end)
    ]
  end

  @doc """
  One set of options per worker of the pool (`NxJax.Pool`), each naming its worker as the
  `:server` of the calls made with it: `Nx.Serving` with `partitions: true` runs one partition
  per entry, each in its own process, so N workers serve N batches at once. The workers are
  named by their registered names, which a restarted worker takes again. Options that name a
  `:server` already are one partition, on that worker.
  """
  @impl true
  def __partitions_options__(opts) when is_list(opts), do: NxJax.Pool.partitions(opts)

  # results come back as binary backend tensors
  @impl true
  def __to_backend__(_opts), do: {Nx.BinaryBackend, []}

  ## Traces, by key and argument signature

  # what a call needs once it is traced: the encoded graph, its key, the arguments it reads
  # and the template of its results
  defp entry(key, vars, fun) do
    signature = for var <- vars, do: signature(var)
    cache_key = {__MODULE__, key, signature}

    NxJax.TraceCache.fetch(cache_key, fn -> trace(vars, fun) end)
  end

  # (a walk of its own for tensors and tuples, the common arguments, as each call makes one:
  # Composite.traverse/2 goes through the Nx.Container protocol for every tuple)
  defp signature(%T{type: type, shape: shape, names: names, vectorized_axes: axes}),
    do: {type, shape, names, axes}

  defp signature(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> tuple_signature([]) |> List.to_tuple()

  defp signature(container), do: Composite.traverse(container, &signature/1)

  defp tuple_signature([leaf | rest], acc), do: tuple_signature(rest, [signature(leaf) | acc])
  defp tuple_signature([], acc), do: :lists.reverse(acc)

  defp trace(vars, fun) do
    outputs = fun.(vars)
    template = Nx.to_template(outputs)
    {graph, parameters, hooks} = NxJax.WireEncoder.encode(outputs)
    NxJax.Ops.check_graph!(graph)
    graph_bin = :erlang.term_to_binary(graph)
    outs = for t <- Composite.flatten_list([template]), do: full_out(t)

    %{
      graph: graph_bin,
      key: NxJax.Worker.graph_key(graph_bin),
      parameters: parameters,
      hooks: hooks,
      template: template,
      outs: outs
    }
  end

  # Runs in the caller while the worker computes: a hook's function (the `hooks:` option of
  # the jit overrides it by name) on the hooked values, in the hooked container.
  defp on_hook(hooks, _overrides) when hooks == %{}, do: nil

  defp on_hook(hooks, overrides) do
    fn index, wire ->
      with {:ok, {name, callback, template}} <- Map.fetch(hooks, index),
           fun when is_function(fun, 1) <- Map.get(overrides, name) || callback do
        fun.(fill(template, wire))
      end
    end
  end

  ## A call

  defp run(%{outs: []} = entry, _args, _opts), do: entry.template

  # Results stay resident on the worker (`NxJax.Backend`) when an argument is, or when the
  # caller's default backend is `NxJax.Backend`; the call goes where its resident arguments
  # live.
  defp run(entry, args, opts) do
    args = List.to_tuple(args)
    tensors = for i <- entry.parameters, do: elem(args, i).()
    home = home(tensors)
    keep = home != nil or match?({NxJax.Backend, _}, Nx.default_backend())

    NxJax.Pool.with_worker(
      opts[:server] || home,
      fn server ->
        wire = for t <- tensors, do: to_wire(t, server)
        call_opts = [{:server, server} | opts]

        results =
          try do
            cond do
              # `debug_nans: true`: the worker runs the graph op by op and stops at the first
              # NaN or infinity, naming its node (py_backend/debug_nans.py)
              opts[:debug_nans] == true ->
                NxJax.Worker.call(:debug_run, [entry.graph, wire], call_opts)

              Keyword.has_key?(opts, :donated) ->
                donate = donate(opts[:donated], tensors, server)
                call_opts = if donate == [], do: call_opts, else: [{:donate, donate} | call_opts]
                results = NxJax.Worker.run_cached(entry.key, entry.graph, wire, keep, call_opts)
                disarm_donated(donate, tensors)
                results

              true ->
                NxJax.Worker.run_cached(entry.key, entry.graph, wire, keep, call_opts)
            end
          rescue
            error in NxJax.WorkerError ->
              reraise explain(error, tensors, entry.graph), __STACKTRACE__
          end

        # (a resident argument's guard must outlive the request that names its handle)
        NxJax.Guard.keep(tensors)
        fill(entry.template, results, server)
      end,
      opts
    )
  end

  # Of the donation candidates (positions in `tensors`), those resident on `server`. Donating
  # a tensor that is not resident does nothing, as JAX does with a host array; neither does
  # donating one the call reads twice (one zeros tensor as two optimizer moments): its memory
  # cannot go to a result while another argument still reads it.
  defp donate(candidates, tensors, server) do
    counts = Enum.frequencies(for %T{data: %NxJax.Backend{handle: h}} <- tensors, do: h)
    tensors = List.to_tuple(tensors)

    for i <- candidates,
        %T{data: %NxJax.Backend{worker: ^server, handle: h}} <- [elem(tensors, i)],
        counts[h] == 1,
        do: i
  end

  # a donated tensor is no longer resident (its worker dropped it): its guard has nothing to
  # free, and reading it says why it is gone (NxJax.Resident.explain_unknown/2)
  defp disarm_donated(donate, tensors) do
    for i <- donate do
      %T{data: %NxJax.Backend{guard: guard}} = Enum.at(tensors, i)
      NxJax.Guard.disarm(guard, :donated)
    end
  end

  # debug_nans' report (py_backend/debug_nans.py) names the graph's nodes as {node N}: here
  # each becomes the node with the types and shapes of its operands, read from the graph sent.
  # There is no source line to name: real Nx 0.7.2's expressions (%Nx.Defn.Expr{id, op, args,
  # context}) record none, and the line of a defn's call lives only in the stack while real Nx
  # traces it (docs/DIFFERENTIATION.md, "Under real Nx").
  defp explain(%NxJax.WorkerError{class: "NonFinite", message: message} = error, _tensors, graph) do
    {:nx_jax_graph, _version, nodes, _outputs} = :erlang.binary_to_term(graph)
    outs = Map.new(nodes, fn {id, _op, _inputs, _opts, out} -> {id, out} end)
    inputs = Map.new(nodes, fn {id, _op, inputs, _opts, _out} -> {id, inputs} end)

    message =
      Regex.replace(~r/\{node (\d+)\}/, message, fn _, id ->
        id = String.to_integer(id)

        case Map.get(inputs, id, []) do
          [] ->
            "(graph node #{id})"

          operands ->
            shapes = Enum.map_join(operands, ", ", &describe_out(Map.get(outs, &1)))
            "(graph node #{id}, operands #{shapes})"
        end
      end)

    %{error | message: message <> " (real Nx's expressions record no source line)"}
  end

  defp explain(error, tensors, _graph), do: NxJax.Resident.explain_unknown(error, tensors)

  # an operand as Nx writes a tensor's type and shape: f32[2][3]
  defp describe_out({type, shape}) when is_tuple(shape),
    do: Nx.Type.to_string(type) <> Enum.map_join(Tuple.to_list(shape), &"[#{&1}]")

  defp describe_out(_tuple_or_unknown), do: "a tuple"

  defp fill(template, results, server \\ nil) do
    {filled, []} = fill_walk(template, results, server)
    filled
  end

  # (a walk of its own for tensors and tuples, as for the signature: this runs on every call)
  defp fill_walk(%T{} = leaf, [result | rest], server),
    do: {from_wire(leaf, result, server), rest}

  defp fill_walk(tuple, results, server) when is_tuple(tuple) do
    {filled, rest} = fill_list(Tuple.to_list(tuple), results, server, [])
    {List.to_tuple(filled), rest}
  end

  defp fill_walk(container, results, server) do
    Composite.traverse(container, results, fn leaf, [result | rest] ->
      {from_wire(leaf, result, server), rest}
    end)
  end

  defp fill_list([item | items], results, server, acc) do
    {filled, results} = fill_walk(item, results, server)
    fill_list(items, results, server, [filled | acc])
  end

  defp fill_list([], results, _server, acc), do: {:lists.reverse(acc), results}

  defp home([tensor | rest]), do: NxJax.Resident.worker(tensor) || home(rest)
  defp home([]), do: nil

  # an argument's bytes or its handle, vectorized axes leading its shape
  defp to_wire(%T{type: type, vectorized_axes: [], data: %Nx.BinaryBackend{state: data}} = t, _),
    do: {type, t.shape, data}

  defp to_wire(%T{vectorized_axes: []} = tensor, server),
    do: NxJax.Resident.to_wire(tensor, server)

  defp to_wire(%T{} = tensor, server),
    do: NxJax.Resident.to_wire(Nx.devectorize(tensor, keep_names: false), server)

  # the worker must answer with the declared type and shape (PROTOCOL 4)
  defp from_wire(%T{} = template, {type, shape, binary}, _server) when is_binary(binary) do
    declared!(template, {type, shape})
    %T{template | data: %Nx.BinaryBackend{state: binary}}
  end

  defp from_wire(%T{} = template, {:ref, handle, guard}, server),
    do: %T{template | data: %NxJax.Backend{worker: server, handle: handle, guard: guard}}

  defp from_wire(%T{} = template, {:ref, handle, guard, copy}, server) do
    {type, shape} = full_out(template)
    declared!(template, {type, if(byte_size(copy) == Nx.byte_size(template), do: shape)})
    data = %NxJax.Backend{worker: server, handle: handle, guard: guard, copy: copy}
    %T{template | data: data}
  end

  defp declared!(template, answer) do
    if full_out(template) != answer do
      raise NxJax.WorkerError,
        class: "ShapeError",
        message:
          "the worker returned #{inspect(answer)} for an output declared " <>
            "#{inspect(full_out(template))}"
    end
  end

  defp full_out(%T{type: type, shape: shape, vectorized_axes: []}), do: {type, shape}

  defp full_out(%T{type: type, shape: shape, vectorized_axes: axes}),
    do: {type, List.to_tuple(Keyword.values(axes) ++ Tuple.to_list(shape))}
end
