defmodule NxJax.Test.SeamRun do
  @moduledoc """
  The run of the suite's tagged tests under the seam compiler (`make test-seam`:
  `NX_JAX_TEST_COMPILER=seam mix test`). `test_helper.exs` then makes this module the global
  default compiler (`Nx.Defn.global_default_options/1`) and runs only the tests tagged
  `:seam`, one at a time. Every `defn`, `jit`, `compile` and stream step of those tests
  reaches `NxJax.Test.SeamCompiler` through this module, which checks two things:

    * no worker request is made while the seam compiler traces or evaluates (the pool's
      request counters are read before and after each entry: an eager `Nx` op outside `defn`
      still runs on the worker, as everywhere in the clean room, but `defn` does not);
    * each tagged test entered the seam compiler at least once (a test whose `defn` calls
      went elsewhere, its process's own default options naming another compiler say, fails
      in its `on_exit`).

  A module with tagged tests registers its tests with `setup context, do: NxJax.Test.SeamRun.watch(context)`
  (a no-op in any other run). Once the run is over it prints how many tests entered the seam
  compiler and how often.
  """

  @behaviour Nx.Defn.Compiler

  alias NxJax.Test.SeamCompiler

  @variable "NX_JAX_TEST_COMPILER"
  @table __MODULE__

  @doc "Whether this run is the seam run (`#{@variable}=seam`); raises on another value."
  def active? do
    case System.get_env(@variable, "") do
      "" ->
        false

      "seam" ->
        true

      other ->
        raise ArgumentError,
              "#{@variable} names the compiler of a run of the tagged tests: seam (or unset " <>
                "for the default compiler), got: #{inspect(other)}"
    end
  end

  @doc "Makes this module the default compiler of every process and starts the counts."
  def start do
    :ets.new(@table, [:named_table, :public, :set])
    :ets.insert(@table, [{:entries, 0}, {:unattributed, 0}])
    Nx.Defn.global_default_options(compiler: __MODULE__)
    ExUnit.after_suite(fn _results -> IO.puts(summary()) end)
    :ok
  end

  @doc """
  A test's setup: in the seam run, a test tagged `:seam` is watched (its entries into the seam
  compiler are counted, and it fails if there are none); elsewhere nothing.
  """
  def watch(context) do
    if context[:seam] && :ets.whereis(@table) != :undefined do
      test = self()
      :ets.insert(@table, {test, 0})

      ExUnit.Callbacks.on_exit(fn ->
        [{^test, entries}] = :ets.lookup(@table, test)

        if entries == 0 do
          raise "#{inspect(context.module)} #{inspect(context.test)} is tagged :seam but " <>
                  "never entered the seam compiler"
        end
      end)
    end

    :ok
  end

  @doc "The line printed after the run: tests watched, those that entered, entries."
  def summary do
    tests = for {pid, n} <- :ets.tab2list(@table), is_pid(pid), do: n
    [{:entries, entries}] = :ets.lookup(@table, :entries)
    [{:unattributed, unattributed}] = :ets.lookup(@table, :unattributed)

    "seam run: #{Enum.count(tests, &(&1 > 0))} of #{length(tests)} tagged tests ran defn " <>
      "through NxJax.Test.SeamCompiler (#{entries} entries, #{unattributed} from no watched " <>
      "test), with no worker request during any"
  end

  ## Nx.Defn.Compiler, by the seam compiler, each entry checked

  @impl true
  def __jit__(key, vars, fun, args_list, opts),
    do: checked(fn -> SeamCompiler.__jit__(key, vars, fun, args_list, opts) end)

  @impl true
  def __compile__(key, vars, fun, opts) do
    run = checked(fn -> SeamCompiler.__compile__(key, vars, fun, opts) end)
    fn args_list -> checked(fn -> run.(args_list) end) end
  end

  # (as the seam compiler's, each step checked)
  @impl true
  def __stream__(key, input, acc, vars, fun, [args], opts) do
    run = __compile__(key, vars, fun, opts)
    rest = Enum.drop(args, Nx.Defn.Composite.count(input) + Nx.Defn.Composite.count(acc))

    step = fn data, acc ->
      [result] = run.([Nx.Defn.Stream.step_args(data, acc, rest)])
      result
    end

    [Nx.Defn.Stream.start_link(input, acc, step)]
  end

  @impl true
  defdelegate __partitions_options__(opts), to: SeamCompiler

  @impl true
  defdelegate __to_backend__(opts), to: SeamCompiler

  # runs `fun` (a trace or an evaluation of the seam compiler), counted for the watched test of
  # this process (or one it was started by), and raises if the pool's workers were sent a
  # request meanwhile (the run has one test at a time: any request is this test's)
  defp checked(fun) do
    :ets.update_counter(@table, :entries, 1)
    :ets.update_counter(@table, watched_test(), 1)
    before = worker_requests()

    try do
      fun.()
    after
      now = worker_requests()

      if now != before do
        raise "a worker request was made while the seam compiler ran: #{inspect(before)} " <>
                "became #{inspect(now)}"
      end
    end
  end

  defp watched_test do
    ancestry = [self() | Process.get(:"$callers", [])] ++ Process.get(:"$ancestors", [])
    Enum.find(ancestry, :unattributed, &(is_pid(&1) and :ets.member(@table, &1)))
  end

  # the requests the pool's workers have been sent (runs in Python, calls that carried a graph
  # or its key, calls that borrowed the port)
  defp worker_requests do
    Map.take(NxJax.Pool.stats(), [:runs, :graph_sends, :key_calls, :lent_calls])
  end
end
