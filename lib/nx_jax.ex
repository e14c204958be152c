defmodule NxJax do
  @moduledoc """
  nx_jax's compiler: runs the graphs of `defn`, `Nx.Defn.jit/2` and eager `Nx` ops on the
  JAX worker. It implements Nx 0.7.2's `Nx.Defn.Compiler` (`__jit__/5`, `__compile__/4`,
  `__stream__/7`, `__partitions_options__/1`, `__to_backend__/1`), so that a compiler of a
  user's or a library's that wraps it (`compiler: MyCompiler`, which calls `NxJax.__jit__/5`)
  runs on the worker; those callbacks trace, encode and cache by key and argument signature
  with the front end's trace cache (`Nx.Defn.Compiler.graph_trace/5`). It is also the
  clean-room Nx's default compiler (`config :nx, :default_compiler`), which the front end's own
  cached path reaches through the two graph callbacks, `__compile__/1` and `__run__/5`;
  `Nx.Defn.Compiler.current/0` names it while tracing.

  A graph is checked against the op registry (`NxJax.Ops`) and sent once (its key,
  `NxJax.Worker.graph_key/1`, afterwards). Each call goes to the worker where a resident
  argument lives, else to the least busy one of the pool (`NxJax.Pool`); results stay
  resident there (`NxJax.Backend`) when an argument was, or when the calling process's default
  backend is `NxJax.Backend`.
  """

  @behaviour Nx.Defn.Compiler

  @doc """
  The platform, the device and all the devices of a worker, as JAX names them
  (`NxJax.Devices.list/1`).

      NxJax.devices()
      #=> %{platform: "cpu", device: "cpu:0", devices: ["cpu:0"]}
  """
  defdelegate devices(opts \\ []), to: NxJax.Devices, as: :list

  # the options of a call that this compiler reads (those of its worker calls); the rest belong
  # to Nx or to other compilers (a wrapping compiler's own, `client:` of EXLA's), and are
  # ignored, as Nx's compilers do
  @run_options [:timeout, :server, :hooks, :hooks_in, :retry, :retryable, :reply_spin_us] ++
                 [:debug_nans, :donate]

  @impl true
  def __jit__(key, vars, fun, args_list, opts), do: __compile__(key, vars, fun, opts).(args_list)

  @impl true
  def __compile__(key, vars, fun, opts) do
    opts = Keyword.take(opts, @run_options)
    compiled = Nx.Defn.Compiler.graph_trace(__MODULE__, key, vars, fun, opts)

    fn args_list ->
      for args <- args_list,
          do: Nx.Defn.Compiler.graph_run(__MODULE__, compiled, vars, args, opts)
    end
  end

  # One step per input sent (traced once, on `vars`), in the stream's process: the input's
  # tensors, the accumulator so far and the other arguments of `args` in the order of `vars`.
  # As EXLA's streams (and nx_jax's under real Nx): each output is checked against the step's
  # output template, and a stream that has ended raises on recv.
  @impl true
  def __stream__(key, input, acc, vars, fun, [args], opts) do
    opts = Keyword.take(opts, @run_options)
    compiled = Nx.Defn.Compiler.graph_trace(__MODULE__, {:stream, key}, vars, fun, opts)
    rest = Enum.drop(args, Nx.Defn.Composite.count(input) + Nx.Defn.Composite.count(acc))

    output =
      case Nx.Defn.Compiler.graph_template(compiled) do
        {output, _acc} ->
          output

        other ->
          raise ArgumentError,
                "the function given to Nx.Defn.stream/3 must return a tuple " <>
                  "{output, accumulator}, got: #{inspect(other)}"
      end

    step = fn data, acc ->
      args = Nx.Defn.Stream.step_args(data, acc, rest)
      Nx.Defn.Compiler.graph_run(__MODULE__, compiled, vars, args, opts)
    end

    [Nx.Defn.Stream.start_link(input, acc, step, output: output, gone: :raise)]
  end

  # one partition per worker of the pool, each pinned to it (NxJax.Pool.partitions/1)
  @impl true
  def __partitions_options__(opts) when is_list(opts), do: NxJax.Pool.partitions(opts)

  # results stay resident on the worker (NxJax.Backend) when that is the caller's default
  # backend (or an argument is resident); else they come back as binary backend tensors
  @impl true
  def __to_backend__(_opts) do
    if match?({NxJax.Backend, _}, Nx.default_backend()),
      do: {NxJax.Backend, []},
      else: {Nx.BinaryBackend, []}
  end

  @impl true
  def __compile__(graph) do
    NxJax.Ops.check_graph!(graph)
    graph_bin = :erlang.term_to_binary(graph)
    {graph_bin, NxJax.Worker.graph_key(graph_bin)}
  end

  @impl true
  def __run__({graph_bin, key}, args, templates, hooks, opts) do
    home = home(args)
    keep = home != nil or match?({NxJax.Backend, _}, Nx.default_backend())

    NxJax.Pool.with_worker(
      Keyword.get(opts, :server) || home,
      fn server ->
        wire = to_wire(args, server)
        debug = Keyword.get(opts, :debug_nans, false) == true

        results =
          try do
            cond do
              # (the common call: no hook runner, no option list to copy)
              hooks == %{} and not debug and not Keyword.has_key?(opts, :donated) ->
                NxJax.Worker.run_cached(key, graph_bin, wire, keep, [{:server, server} | opts])

              debug ->
                call_opts = [server: server, on_hook: on_hook(hooks, opts, server)]
                debug_run(graph_bin, wire, call_opts ++ opts)

              true ->
                {donate, opts} = donated(opts, args, server)
                call_opts = [server: server, on_hook: on_hook(hooks, opts, server)]
                call_opts = if donate == [], do: call_opts, else: [{:donate, donate} | call_opts]
                results = NxJax.Worker.run_cached(key, graph_bin, wire, keep, call_opts ++ opts)
                disarm_donated(donate, args)
                results
            end
          rescue
            error in NxJax.WorkerError ->
              reraise NxJax.Backend.explain_unknown(error, args), __STACKTRACE__
          end

        # (a resident argument's guard must outlive the request that names its handle)
        NxJax.Guard.keep(args)
        from_wire_all(templates, results, server)
      end,
      opts
    )
  end

  # `:donated` (positions of `args`, Nx.Defn.Compiler): those of them resident on `server`,
  # whose memory the results may reuse. Donating a tensor that is not resident is a no-op, as
  # in JAX for an argument not on the device; so is donating one that the call takes more
  # than once (the same zeros as two optimizer moments): its memory cannot go to a result
  # while another argument still reads it.
  defp donated(opts, args, server) do
    {positions, opts} = Keyword.pop(opts, :donated, [])

    counts = Enum.frequencies(for %Nx.Tensor{data: %NxJax.Backend{handle: h}} <- args, do: h)

    args = List.to_tuple(args)

    donate =
      for i <- positions,
          %Nx.Tensor{data: %NxJax.Backend{worker: ^server, handle: h}} <- [elem(args, i)],
          counts[h] == 1,
          do: i

    {donate, opts}
  end

  # a donated tensor is no longer resident (its worker dropped it): its guard has nothing to
  # free, and reading it says why it is gone (NxJax.Backend.explain_unknown/2)
  defp disarm_donated(donate, args) do
    for i <- donate do
      %Nx.Tensor{data: %NxJax.Backend{guard: guard}} = Enum.at(args, i)
      NxJax.Guard.disarm(guard, :donated)
    end
  end

  # `debug_nans: true`: the worker runs the graph op by op and stops at the first NaN or
  # infinity (py_backend/debug_nans.py); its report names nodes `{node N}`, replaced here by
  # the place in the source that made each one (Nx.Defn.Expr.with_sites/1)
  defp debug_run(graph_bin, wire, opts) do
    NxJax.Worker.call(:debug_run, [graph_bin, wire], opts)
  rescue
    error in NxJax.WorkerError ->
      if error.class == "NonFinite" do
        sites = Keyword.get(opts, :debug_sites, %{})

        message =
          Regex.replace(~r/\{node (\d+)\}/, error.message, fn _, id ->
            case sites[String.to_integer(id)] do
              nil -> "(node #{id})"
              site -> "at #{site}"
            end
          end)

        reraise %{error | message: message}, __STACKTRACE__
      else
        reraise error, __STACKTRACE__
      end
  end

  # The worker of the first resident argument, nil if none; the arguments' wire forms. (Local
  # walks: this runs on every call, where each library function a call passes through costs
  # more on a CPU shared with the worker, `git show 19d163f:docs/BENCHMARKS.md`, "The client's layers on a shared CPU, cut one by one".)
  defp home([arg | rest]), do: NxJax.Backend.worker(arg) || home(rest)
  defp home([]), do: nil

  defp to_wire([%Nx.Tensor{vectorized_axes: []} = arg | rest], server),
    do: [NxJax.Backend.to_wire(arg, server) | to_wire(rest, server)]

  defp to_wire([arg | rest], server),
    do: [NxJax.Backend.to_wire(full_shape(arg), server) | to_wire(rest, server)]

  defp to_wire([], _server), do: []

  # (one result, the common case, without the zip)
  defp from_wire_all([template], [result], server), do: [from_wire(template, result, server)]

  defp from_wire_all(templates, results, server),
    do: Enum.zip_with(templates, results, &from_wire(&1, &2, server))

  # vectorized arguments travel devectorized (their full shape)
  defp full_shape(tensor), do: Nx.devectorize(tensor, keep_names: false)

  # Runs in the caller while the worker computes: the hook's function (the jit's `hooks:`
  # option overrides it by name) on the concrete values, in the hooked container.
  defp on_hook(hooks, _opts, _server) when hooks == %{}, do: nil

  defp on_hook(hooks, opts, server) do
    overrides = Keyword.get(opts, :hooks) || %{}

    fn index, wire ->
      with {:ok, {name, fun, template}} <- Map.fetch(hooks, index),
           fun when is_function(fun, 1) <- (name && Map.get(overrides, name)) || fun do
        templates = Nx.Defn.Composite.flatten_list([template])
        values = from_wire_all(templates, wire, server)
        fun.(Nx.Defn.Composite.fill(template, values))
      end
    end
  end

  # The worker must answer with the declared type and shape (PROTOCOL 4).
  defp from_wire(%Nx.Tensor{vectorized_axes: [_ | _]} = template, result, server) do
    # a vectorized result comes back devectorized: check its full shape
    result =
      template
      |> Nx.devectorize(keep_names: false)
      |> from_wire(result, server)
      |> Nx.vectorize(template.vectorized_axes)

    %Nx.Tensor{result | names: template.names}
  end

  defp from_wire(%Nx.Tensor{type: type, shape: shape} = template, {type, shape, binary}, _) do
    %Nx.Tensor{template | data: %Nx.BinaryBackend{state: binary}}
  end

  defp from_wire(%Nx.Tensor{} = template, {:ref, handle, guard}, server) do
    %Nx.Tensor{template | data: %NxJax.Backend{worker: server, handle: handle, guard: guard}}
  end

  defp from_wire(%Nx.Tensor{} = template, {:ref, handle, guard, copy}, server) do
    if byte_size(copy) != Nx.byte_size(template) do
      raise NxJax.WorkerError,
        class: "ShapeError",
        message:
          "the worker returned #{byte_size(copy)} bytes for a resident output declared " <>
            "#{inspect(template.type)} #{inspect(template.shape)}"
    end

    data = %NxJax.Backend{worker: server, handle: handle, guard: guard, copy: copy}
    %Nx.Tensor{template | data: data}
  end

  defp from_wire(%Nx.Tensor{type: type, shape: shape}, {wire_type, wire_shape, _binary}, _) do
    raise NxJax.WorkerError,
      class: "ShapeError",
      message:
        "the worker returned #{inspect(wire_type)} #{inspect(wire_shape)} for an output " <>
          "declared #{inspect(type)} #{inspect(shape)}"
  end
end
