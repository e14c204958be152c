defmodule NxJax.Test.SeamRun do
  @moduledoc """
  The run of the suite's tagged tests under the seam compiler (`make test-seam`:
  `NX_JAX_TEST_COMPILER=seam mix test`). `test_helper.exs` then makes this module the global
  default compiler (`Nx.Defn.global_default_options/1`) and runs only the tests tagged
  `:seam`. Every `defn`, `jit`, `compile` and stream step of those tests
  reaches `NxJax.Test.SeamCompiler` through this module, which checks two things:

    * nothing calls into nx_jax's runtime (`NxJax.__run__/5`, `NxJax.Pool`, `NxJax.Worker`:
      the ways to a worker request) while the seam compiler traces or evaluates (`checked/1`;
      an eager `Nx` op outside `defn` still runs on the worker, as everywhere in the clean
      room, but `defn` does not);
    * each tagged test entered the seam compiler at least once (a test whose `defn` calls
      went elsewhere, its process's own default options naming another compiler say, fails
      in its `on_exit`).

  A module with tagged tests registers its tests with
  `setup context, do: NxJax.Test.SeamRun.watch(context)` (a no-op in any other run). Once the
  run is over it prints how many tests entered the seam compiler and how often.
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
    :ets.insert(@table, [{:entries, 0}, {:unattributed, 0}, {:runtime_calls, 0}])
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

  @doc """
  The line printed after the run: the tests watched and those that entered the seam compiler,
  the entries, and how many of them called nx_jax's runtime (0, or their tests failed).
  """
  def summary do
    tests = for {pid, n} <- :ets.tab2list(@table), is_pid(pid), do: n
    [{:entries, entries}] = :ets.lookup(@table, :entries)
    [{:unattributed, unattributed}] = :ets.lookup(@table, :unattributed)
    [{:runtime_calls, runtime_calls}] = :ets.lookup(@table, :runtime_calls)

    "seam run: #{Enum.count(tests, &(&1 > 0))} of #{length(tests)} tagged tests ran defn " <>
      "through NxJax.Test.SeamCompiler (#{entries} entries, #{unattributed} of them from no " <>
      "watched test); #{runtime_calls} entries called nx_jax's runtime"
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
  def __stream__(key, input, acc, vars, fun, [args], opts),
    do: SeamCompiler.stream(__compile__(key, vars, fun, opts), input, acc, args)

  @impl true
  defdelegate __partitions_options__(opts), to: SeamCompiler

  @impl true
  defdelegate __to_backend__(opts), to: SeamCompiler

  @doc """
  Runs `fun` and raises if it, or a process it starts, calls into nx_jax's runtime meanwhile:
  `NxJax.__run__/5` or a function of `NxJax.Pool` or `NxJax.Worker`, the ways to a worker
  request (Erlang call tracing of this process, so that the calls of other processes, a test
  file compiling beside the run say, are not counted). In the seam run, each call is also
  counted for the watched test it serves.
  """
  def checked(fun) do
    if :ets.whereis(@table) != :undefined do
      :ets.update_counter(@table, :entries, 1)
      :ets.update_counter(@table, watched_test(), 1)
    end

    # (a call inside another, a nested jit, is watched by the outer one)
    case Process.put({__MODULE__, :checking}, true) do
      true -> fun.()
      nil -> traced(fun)
    end
  end

  @runtime [{NxJax, :__run__, 5}, {NxJax.Pool, :_, :_}, {NxJax.Worker, :_, :_}]

  # (each window has a tracer of its own, so that windows of concurrent processes, a test's
  # tasks say, see only their own calls)
  defp traced(fun) do
    patterns()
    tracer = spawn(&collect/0)
    :erlang.trace(self(), true, [:call, :set_on_spawn, {:tracer, tracer}])

    try do
      fun.()
    after
      :erlang.trace(self(), false, [:call, :set_on_spawn])
      Process.delete({__MODULE__, :checking})
      ref = :erlang.trace_delivered(self())

      receive do
        {:trace_delivered, _pid, ^ref} -> :ok
      end

      send(tracer, {:take, self(), ref})

      receive do
        {^ref, []} ->
          :ok

        {^ref, calls} ->
          if :ets.whereis(@table) != :undefined,
            do: :ets.update_counter(@table, :runtime_calls, 1)

          raise "the seam compiler's run called nx_jax's runtime, the way to a worker " <>
                  "request: " <> Enum.map_join(calls, ", ", &mfa/1)
      end
    end
  end

  # the calls of the runtime's functions are traced (for traced processes only), once; a
  # pattern holds for the code loaded when it is set: the modules are loaded first
  defp patterns do
    unless :persistent_term.get({__MODULE__, :patterns}, false) do
      for {module, _, _} = mfa <- @runtime do
        Code.ensure_loaded!(module)
        :erlang.trace_pattern(mfa, true, [:global])
      end

      :persistent_term.put({__MODULE__, :patterns}, true)
    end
  end

  # a tracer: the calls reported to it, until it is asked for them (then it ends; a process
  # still traced with it is traced no more)
  defp collect(calls \\ []) do
    receive do
      {:trace, _pid, :call, {module, function, args}} ->
        collect([{module, function, length(args)} | calls])

      {:take, from, ref} ->
        send(from, {ref, Enum.reverse(calls)})
    end
  end

  defp mfa({module, function, arity}), do: Exception.format_mfa(module, function, arity)

  defp watched_test do
    ancestry = [self() | Process.get(:"$callers", [])] ++ Process.get(:"$ancestors", [])
    Enum.find(ancestry, :unattributed, &(is_pid(&1) and :ets.member(@table, &1)))
  end
end
