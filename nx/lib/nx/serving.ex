defmodule Nx.Serving do
  @moduledoc """
  Runs a computation on batches of requests, as Nx 0.7.2's `Nx.Serving`: inline in the
  calling process (`run/2`), or in a serving process that gathers the requests of many
  clients into batches (`start_link/1`, `batched_run/3`), on this node or another one.

  A serving is made of:

    * what computes a batch: a function given the defn options that returns a jitted or
      compiled function of one `Nx.Batch` (`new/2`, `jit/2`), or a module implementing the
      `init/3` and `handle_batch/3` callbacks of this behaviour (`new/3`);
    * the client's steps around it, run in the calling process: `client_preprocessing/2`
      turns the input into an `Nx.Batch` (or a stream of them) and some information of the
      client's, `client_postprocessing/2` turns the result (or the stream of results, see
      `streaming/2`) and that information into the answer;
    * the options of the serving process (`process_options/2`, `start_link/1`) and of
      `defn` (`defn_options/2`).

  With no compiler named, jitted functions run on the clean room's default compiler (nx_jax's
  `NxJax`), as every `defn` does.

  ## Inline

      serving = Nx.Serving.jit(&Nx.multiply(&1, 2))
      Nx.Serving.run(serving, Nx.Batch.stack([Nx.tensor([1, 2])]))
      #=> #Nx.Tensor<
      #=>   s64[1][2]
      #=>   [
      #=>     [2, 4]
      #=>   ]
      #=> >

  The default preprocessing takes a batch (or a stream of batches) as it is; the default
  postprocessing returns the output alone. With `batch_size/2`, a larger batch is computed
  in parts of that many rows at most and the outputs joined.

  ## A serving process

      children = [
        {Nx.Serving, serving: Nx.Serving.jit(&MyModel.predict/1), name: MyModel,
         batch_size: 16, batch_timeout: 20}
      ]

      Nx.Serving.batched_run(MyModel, Nx.Batch.stack([x]))

  The process gathers requests of one batch key into a batch until it holds `:batch_size`
  rows or `:batch_timeout` milliseconds passed since its first rows came, then computes it
  in a task on a free partition; each client gets its own rows of the output back. A request
  larger than the room left is split over batches (and put together again for its client).
  Batches are not padded to `:batch_size`: the computation may do so with `Nx.Batch.pad/2`,
  its output rows beyond those of the requests are dropped.

  `partitions: true` asks the compiler for its partitions
  (`c:Nx.Defn.Compiler.__partitions_options__/1`; `Nx.Defn.Evaluator`, when none is named,
  gives `:max_concurrency` of them): each partition computes one batch at a time, with its
  own defn options.

  A failure while a batch is computed (an exception raised by the function that
  `c:handle_batch/3` returned, or by the callback itself) reaches every client of that batch
  as an exit, `{{exception, stacktrace}, {Nx.Serving, :local_batched_run, [name, input]}}`;
  the serving goes on with the next batches.

  ## Distribution

  Every serving process joins the process group `Nx.Serving` of the `:pg` scope
  `Nx.Serving.PG` (started by the `:nx` application) as many times as its weight
  (`:distribution_weight` times its partitions). `batched_run/3` with a name that is not
  registered on this node, or `{:distributed, name}`, sends the request to one of the
  servings of that name in the cluster, picked at random by weight; the client's pre- and
  postprocessing run on that serving's node, outside the serving process, and
  `distributed_postprocessing/2` on the result before it travels back.

  ## Streaming

  A stream of batches from the preprocessing is sent batch by batch, each batch once the
  previous one is computed. `streaming/2` makes `run/2` and `batched_run/3` return a stream of
  `{:batch, output, metadata}` events, one per computed part, and, with `:hooks`, of
  `{hook_name, value}` events for the `defn` hooks named (which then needs a request of one
  batch of at most `:batch_size` rows, never split). The stream must be consumed in the
  process that made the request.

  ## Batch keys

  A batch carries a key (`Nx.Batch.key/2`); a serving process started with `:batch_keys`
  gathers each key's batches apart, and a function of two arguments given to `new/2`
  receives the key and returns the function for that key's batches.

  ## Telemetry

  Where the `:telemetry` library is loaded, the spans `[:nx, :serving, :preprocessing]`,
  `[:nx, :serving, :postprocessing]` and `[:nx, :serving, :execute]` are emitted with the
  metadata Nx 0.7.2 gives them; the clean room does not depend on it.
  """

  alias Nx.Serving.Client

  @doc false
  @enforce_keys [:module, :arg]
  defstruct [
    :module,
    :arg,
    :client_preprocessing,
    :client_postprocessing,
    :streaming,
    :batch_size,
    distributed_postprocessing: &Function.identity/1,
    process_options: [],
    defn_options: []
  ]

  @type metadata() :: term()
  @type client_info() :: term()
  @type client_preprocessing() ::
          (term() -> {Nx.Batch.t() | Enumerable.t(Nx.Batch.t()), client_info()})
  @type client_postprocessing() :: ({Nx.Container.t(), metadata()}, client_info() -> term())
  @type distributed_preprocessing() :: (term() -> term())
  @type distributed_postprocessing() :: (term() -> term())

  @type t :: %__MODULE__{
          module: atom(),
          arg: term(),
          client_preprocessing: client_preprocessing() | nil,
          client_postprocessing: client_postprocessing() | nil,
          distributed_postprocessing: distributed_postprocessing(),
          process_options: keyword(),
          defn_options: keyword(),
          streaming: nil | %{hooks: [atom()]},
          batch_size: nil | pos_integer()
        }

  # the options of a serving process that process_options/2 may also set
  @process_keys [
    :batch_size,
    :batch_timeout,
    :batch_keys,
    :partitions,
    :shutdown,
    :hibernate_after,
    :spawn_opt,
    :distribution_weight
  ]

  @doc """
  Prepares the serving's state: `type` is `:inline` for `run/2` and `:process` for a serving
  process, `arg` the argument given to `new/3`, and the list holds one keyword list of defn
  options per partition (with `:batch_keys`, the keys the serving takes). Returns
  `{:ok, state}`.
  """
  @callback init(type :: :inline | :process, arg :: term(), [defn_options :: keyword]) ::
              {:ok, state :: term()}

  @doc """
  Given a batch and the partition that is to compute it, returns
  `{:execute, function, state}`: `function`, of no arguments, computes the batch (in another
  process for a serving process) and returns `{output, metadata}`, the output a container of
  tensors whose first axis is the batch's rows.
  """
  @callback handle_batch(Nx.Batch.t(), partition :: non_neg_integer(), state) ::
              {:execute, (() -> {Nx.Container.t(), metadata()}), state}
            when state: term()

  ## Building a serving

  @doc """
  A serving that computes each batch with the function that `function` returns.

  `function` takes the defn options (`defn_options` merged over
  `Nx.Defn.default_options/0`, with `:batch_keys`) and returns a function of one argument,
  jitted (`Nx.Defn.jit/2`) or compiled (`Nx.Defn.compile/3`), called on each batch. A function
  of two arguments takes the batch key first and is called once per key.

  With a module (and no third argument), the same as `new(module, arg, [])`.

      iex> serving = Nx.Serving.new(fn opts -> Nx.Defn.jit(&Nx.negate/1, opts) end)
      iex> Nx.Serving.run(serving, Nx.Batch.concatenate([Nx.tensor([1, -2])]))
      #Nx.Tensor<
        s64[2]
        [-1, 2]
      >
  """
  def new(function_or_module, defn_options_or_arg \\ [])

  def new(function, defn_options)
      when (is_function(function, 1) or is_function(function, 2)) and is_list(defn_options) do
    new(Nx.Serving.Default, function, defn_options)
  end

  def new(function, process_options)
      when is_function(function, 0) and is_list(process_options) do
    IO.warn(
      "Nx.Serving.new/2 with a function of no arguments is deprecated: give a function of " <>
        "one argument, the defn options, that returns the jitted function"
    )

    new(Nx.Serving.Default, fn _defn_options -> function.() end, [])
    |> process_options(process_options)
  end

  def new(module, arg) when is_atom(module), do: new(module, arg, [])

  @doc """
  A serving of `module`, which implements this behaviour; `arg` is given to its `init/3`
  and `defn_options` (merged over `Nx.Defn.default_options/0`) make up each partition's
  options.
  """
  def new(module, arg, defn_options) when is_atom(module) and is_list(defn_options) do
    defn_options = Keyword.merge(Nx.Defn.default_options(), defn_options)
    %Nx.Serving{module: module, arg: arg, defn_options: defn_options}
  end

  @doc """
  A serving that jits `fun` with the defn options: `new(fn opts -> Nx.Defn.jit(fun, opts) end,
  defn_options)`.

      iex> serving = Nx.Serving.jit(&Nx.add(&1, 1))
      iex> Nx.Serving.run(serving, Nx.Batch.stack([Nx.tensor(1), Nx.tensor(2)]))
      #Nx.Tensor<
        s64[2]
        [2, 3]
      >
  """
  def jit(fun, defn_options \\ []) do
    new(fn opts -> Nx.Defn.jit(fun, opts) end, defn_options)
  end

  @doc """
  The most rows of a batch the serving computes at once, in `run/2` as in a serving process
  (where it must agree with the `:batch_size` given to `start_link/1`). A larger input is
  computed in parts. Batches are not padded up to it.

      iex> serving = Nx.Serving.jit(&Nx.multiply(&1, 10)) |> Nx.Serving.batch_size(2)
      iex> Nx.Serving.run(serving, Nx.Batch.concatenate([Nx.tensor([1, 2, 3])]))
      #Nx.Tensor<
        s64[3]
        [10, 20, 30]
      >
  """
  def batch_size(%Nx.Serving{} = serving, batch_size)
      when is_integer(batch_size) and batch_size > 0 do
    %{serving | batch_size: batch_size}
  end

  @doc """
  Sets the client preprocessing: a function of the input that returns
  `{batch_or_stream_of_batches, client_info}`. `nil` restores the default, which takes an
  `Nx.Batch` or a stream of them and gives `:client_info`.
  """
  def client_preprocessing(%Nx.Serving{} = serving, function)
      when is_function(function, 1) or is_nil(function) do
    %{serving | client_preprocessing: function}
  end

  @doc """
  Sets the client postprocessing: a function of `{output, metadata}` (or of the stream of
  events, see `streaming/2`) and the client information of the preprocessing. `nil`
  restores the default, which returns the output (or the stream).

  A function of three arguments (output, metadata, information) is deprecated in Nx 0.7.2
  and still taken.
  """
  def client_postprocessing(%Nx.Serving{} = serving, function)
      when is_function(function, 2) or is_nil(function) do
    %{serving | client_postprocessing: function}
  end

  def client_postprocessing(%Nx.Serving{} = serving, function) when is_function(function, 3) do
    IO.warn(
      "Nx.Serving.client_postprocessing/2 with a function of three arguments is deprecated: " <>
        "give a function of {output, metadata} and the client information"
    )

    %{
      serving
      | client_postprocessing: fn {output, metadata}, info ->
          function.(output, metadata, info)
        end
    }
  end

  @doc """
  Sets the function applied, on the serving's node, to the answer of a request that came
  from another node before it is sent back (for instance `&Nx.backend_copy/1` for tensors
  that live on a device). The default is `Function.identity/1`.
  """
  def distributed_postprocessing(%Nx.Serving{} = serving, function)
      when is_function(function, 1) do
    %{serving | distributed_postprocessing: function}
  end

  @doc """
  Makes `run/2` and `batched_run/3` answer with a stream of events, which the
  postprocessing receives in place of `{output, metadata}`:

    * `{:batch, output, metadata}` for each computed part of the request, in turn;
    * with `hooks: [name, ...]`, `{name, value}` each time one of those `defn` hooks runs
      on the request's rows (the request is then never split: one batch of at most
      `:batch_size` rows, and no stream of batches as input).

  The stream must be consumed in the process that made the request. A serving is marked
  streaming once.
  """
  def streaming(%Nx.Serving{} = serving, opts \\ []) when is_list(opts) do
    if serving.streaming do
      raise ArgumentError, "serving is already marked as streaming"
    end

    %{serving | streaming: %{hooks: Keyword.get(opts, :hooks, [])}}
  end

  @doc """
  Sets options of the serving process, those of `start_link/1` but `:name` and `:serving`.
  """
  def process_options(%Nx.Serving{} = serving, opts) when is_list(opts) do
    %{serving | process_options: Keyword.validate!(opts, @process_keys)}
  end

  @doc """
  Sets the defn options of the serving (given to its function, or to its module's `init/3`).
  """
  def defn_options(%Nx.Serving{} = serving, defn_options) when is_list(defn_options) do
    %{serving | defn_options: defn_options}
  end

  ## Inline

  @doc """
  Runs `serving` on `input` in the calling process, at once: the preprocessing, the
  computation of the batch (in parts of `batch_size/2` rows at most, or batch by batch for a
  stream of batches) and the postprocessing.
  """
  def run(%Nx.Serving{} = serving, input) do
    {batch_or_stream, info} = Client.preprocess(serving.client_preprocessing, input)
    result = Nx.Serving.Inline.run(serving, batch_or_stream)
    Client.postprocess(serving.client_postprocessing, result, info)
  end

  ## Serving process

  @doc """
  The child specification of a serving process (see `start_link/1`), of type supervisor and
  id its name.
  """
  def child_spec(opts) when is_list(opts) do
    name = opts[:name]

    if name == nil or not is_atom(name) do
      raise ArgumentError, ":name option is expected when starting Nx.Serving and must be an atom"
    end

    opts[:serving] || raise ArgumentError, ":serving option is expected when starting Nx.Serving"

    %{id: name, start: {__MODULE__, :start_link, [opts]}, type: :supervisor}
  end

  @doc """
  Starts a serving process under a supervisor of its own (with a task supervisor for the
  computations).

  ## Options

    * `:name` - the atom the serving is registered (and found in the cluster) under
    * `:serving` - the `Nx.Serving`
    * `:batch_size` - the most rows of a batch (default: the serving's `batch_size/2`, else 1;
      both given must agree)
    * `:batch_timeout` - the most milliseconds a batch waits for more rows after its first
      ones came (default 100)
    * `:batch_keys` - the batch keys taken (default `[:default]`)
    * `:partitions` - `true` to compute on each of the compiler's partitions
      (default `false`: one)
    * `:distribution_weight` - an integer, the share of the cluster's requests this serving
      gets, times its partitions (default 1)
    * `:shutdown` - the most milliseconds the serving waits, when stopped, for the batches
      being computed (default 30_000)
    * `:hibernate_after`, `:spawn_opt` - as for `GenServer.start_link/3`

  All but `:name` and `:serving` may also be given to `process_options/2`.
  """
  def start_link(opts) do
    opts = Keyword.validate!(opts, [:name, :serving] ++ @process_keys)
    name = Keyword.fetch!(opts, :name)
    serving = Keyword.fetch!(opts, :serving)
    opts = Keyword.merge(serving.process_options, opts)

    batch_size =
      case {serving.batch_size, opts[:batch_size]} do
        {nil, nil} ->
          1

        {size, nil} ->
          size

        {nil, size} ->
          size

        {size, size} ->
          size

        {serving_size, process_size} ->
          raise ArgumentError,
                "the batch size set via Nx.Serving.batch_size/2 (#{serving_size}) " <>
                  "does not match the batch size given to the serving process (#{process_size})"
      end

    weight = Keyword.get(opts, :distribution_weight, 1)

    unless is_integer(weight) do
      raise ArgumentError, ":distribution_weight must be an integer"
    end

    task_supervisor = Module.concat(name, "TaskSupervisor")

    config = %{
      name: name,
      serving: serving,
      partitions: Keyword.get(opts, :partitions, false),
      batch_keys: Keyword.get(opts, :batch_keys, [:default]),
      batch_size: batch_size,
      batch_timeout: Keyword.get(opts, :batch_timeout, 100),
      weight: weight,
      task_supervisor: task_supervisor
    }

    server_options = Keyword.take(opts, [:name, :hibernate_after, :spawn_opt])

    children = [
      {Task.Supervisor, name: task_supervisor},
      %{
        id: __MODULE__,
        start: {GenServer, :start_link, [Nx.Serving.Server, config, server_options]},
        shutdown: Keyword.get(opts, :shutdown, 30_000)
      }
    ]

    Supervisor.start_link(children,
      strategy: :one_for_all,
      max_restarts: 0,
      name: Module.concat(name, "Supervisor")
    )
  end

  @doc """
  Sends `input` to the serving process `name` and waits for the answer.

  `name` is looked up on this node first and, where no process is registered under it, in
  the cluster; `{:local, name}` only looks on this node (an exit `:noproc` where there is
  none), `{:distributed, name}` only in the cluster (this node's servings included, reached
  the way a remote one is). For a request that goes to another node, `distributed_preprocessing`
  is applied to `input` first, on this node (for instance `&Nx.backend_copy/1`).

  The client preprocessing runs before the request is sent and the postprocessing on the
  answer, in the calling process (on the serving's node for a distributed request). A batch
  of a key the serving does not take is an `ArgumentError`.
  """
  def batched_run(name, input, distributed_preprocessing \\ &Function.identity/1)

  def batched_run(name, input, distributed_preprocessing) when is_atom(name) do
    case Process.whereis(name) do
      nil -> Nx.Serving.Distributed.run(name, input, distributed_preprocessing)
      pid -> local_batched_run!(pid, name, input)
    end
  end

  def batched_run({:local, name}, input, _distributed_preprocessing) when is_atom(name) do
    pid =
      Process.whereis(name) || exit({:noproc, {__MODULE__, :local_batched_run, [name, input]}})

    local_batched_run!(pid, name, input)
  end

  def batched_run({:distributed, name}, input, distributed_preprocessing) when is_atom(name) do
    Nx.Serving.Distributed.run(name, input, distributed_preprocessing)
  end

  defp local_batched_run!(pid, name, input) do
    case Client.request(pid, name, input) do
      {:ok, answer} -> answer
      {:down, reason} -> exit({reason, {__MODULE__, :local_batched_run, [name, input]}})
    end
  end

  @doc false
  # run on the serving's node for a request from another one (Nx.Serving.Distributed)
  defdelegate __distributed_batched_run__(client, ref, name, input), to: Nx.Serving.Distributed
end
