defmodule NxJax.CompilerBehaviourTest do
  # Nx.Defn.Compiler as Nx 0.7.2 defines it: a `:compiler` other than the default one is called
  # through its five callbacks, as real Nx calls a compiler (jit/jit_apply -> __jit__/5,
  # compile -> __compile__/4, stream -> __stream__/7, to_backend -> __to_backend__/1), with its
  # options; a compiler of the test's own that wraps NxJax or Nx.Defn.Evaluator is honoured.
  # async: false: reads the node-wide counters of Nx.Defn.Compiler.
  use ExUnit.Case, async: false

  defmodule Wrapping do
    # A compiler that wraps another (`:inner`, NxJax by default): it tells the test process
    # which callback ran with which options, checks what Nx's contract promises of `vars` and
    # `args_list`, and doubles the results of jit when given `double: true` (its own option,
    # which it takes away before calling the inner compiler).
    @behaviour Nx.Defn.Compiler

    @impl true
    def __jit__(key, vars, fun, args_list, opts) do
      {inner, double, opts} = own(:jit, opts)

      for args <- args_list do
        true = length(args) == Enum.sum(Enum.map(vars, &Nx.Defn.Composite.count/1))
        true = Enum.all?(args, &is_function(&1, 0))
      end

      results = inner.__jit__({__MODULE__, key}, vars, fun, args_list, opts)
      if double, do: Enum.map(results, &doubled/1), else: results
    end

    @impl true
    def __compile__(key, vars, fun, opts) do
      {inner, _double, opts} = own(:compile, opts)
      inner.__compile__({__MODULE__, key}, vars, fun, opts)
    end

    @impl true
    def __stream__(key, input, acc, vars, fun, args_list, opts) do
      {inner, _double, opts} = own(:stream, opts)
      inner.__stream__({__MODULE__, key}, input, acc, vars, fun, args_list, opts)
    end

    @impl true
    def __partitions_options__(opts), do: [opts, opts]

    @impl true
    def __to_backend__(opts) do
      {_inner, _double, _opts} = own(:to_backend, opts)
      {Nx.BinaryBackend, [from: __MODULE__]}
    end

    defp own(callback, opts) do
      {pid, opts} = Keyword.pop(opts, :report_to)
      {inner, opts} = Keyword.pop(opts, :inner, NxJax)
      {double, opts} = Keyword.pop(opts, :double, false)
      if pid, do: send(pid, {:called, callback, opts})
      {inner, double, opts}
    end

    defp doubled(result), do: Nx.Defn.Composite.traverse(result, &Nx.multiply(&1, 2))
  end

  defmodule Fns do
    import Nx.Defn

    defn affine(x, y), do: x * 2 + y
    defn with_opts(x, opts \\ []), do: Nx.sum(x, axes: opts[:axes])
    defn running_sum(x, acc), do: {acc, acc + x}
  end

  defp compiler(extra \\ []), do: [compiler: Wrapping, report_to: self()] ++ extra

  test "jit and jit_apply call the compiler's __jit__/5, with its options, and its results" do
    x = Nx.tensor([1.0, 2.0, 3.0])
    y = Nx.tensor([10.0, 20.0, 30.0])

    jitted = Nx.Defn.jit(&Fns.affine/2, compiler(hooks: %{}))
    assert jitted.(x, y) == Nx.tensor([12.0, 24.0, 36.0])
    assert_received {:called, :jit, [hooks: %{}]}
    assert jitted.(y, x) == Nx.tensor([21.0, 42.0, 63.0])
    assert_received {:called, :jit, _}

    # the compiler's own option changes what it returns
    assert Nx.Defn.jit_apply(&Fns.affine/2, [x, 1.0], compiler(double: true)) ==
             Nx.tensor([6.0, 10.0, 14.0])

    assert_received {:called, :jit, []}

    # containers in, containers out; a keyword list among the arguments is not a var
    result =
      Nx.Defn.jit_apply(
        fn {a, b}, %{c: c} -> %{s: Nx.add(a, b), p: Nx.multiply(b, c)} end,
        [{1, 2.0}, %{c: 3}],
        compiler()
      )

    assert result == %{s: Nx.tensor(3.0), p: Nx.tensor(6.0)}

    assert Nx.Defn.jit_apply(&Fns.with_opts/2, [Nx.iota({2, 3}), [axes: [1]]], compiler()) ==
             Nx.tensor([3, 12])

    assert Nx.Defn.jit_apply(&Fns.with_opts/2, [Nx.iota({2, 3}), [axes: [0]]], compiler()) ==
             Nx.tensor([3, 5, 7])
  end

  test "a defn called with the compiler in the default options, and grad, go through it" do
    previous = Nx.Defn.default_options(compiler(double: true))

    try do
      assert Fns.affine(Nx.tensor(1.0), 3.0) == Nx.tensor(10.0)
      assert_received {:called, :jit, []}
      # d/dx of x^3 at 2: 12, doubled by the compiler
      assert Nx.Defn.grad(Nx.tensor(2.0), &Nx.pow(&1, 3)) == Nx.tensor(24.0)
      assert_received {:called, :jit, []}
    after
      Nx.Defn.default_options(previous)
    end
  end

  test "the trace names the compiler; the wrapped NxJax caches the trace by key and signature" do
    parent = self()
    fun = fn x -> send(parent, {:tracing, Nx.Defn.Compiler.current()}) && Nx.exp(x) end
    jitted = Nx.Defn.jit(fun, compiler: Wrapping)
    before = Nx.Defn.Compiler.counters()

    assert_in_delta Nx.to_number(jitted.(Nx.tensor(1.0))), :math.exp(1.0), 1.0e-6
    assert_received {:tracing, Wrapping}
    assert_in_delta Nx.to_number(jitted.(Nx.tensor(2.0))), :math.exp(2.0), 1.0e-5
    refute_received {:tracing, _}
    # another signature traces again
    assert jitted.(Nx.tensor([0.0, 0.0])) == Nx.tensor([1.0, 1.0])
    assert_received {:tracing, Wrapping}

    later = Nx.Defn.Compiler.counters()
    assert later.traces - before.traces == 2
    assert later.trace_cache_hits - before.trace_cache_hits >= 1
  end

  test "compile calls __compile__/4 once; the function it returns runs each call" do
    compiled =
      Nx.Defn.compile(&Fns.affine/2, [Nx.template({2}, :f32), Nx.template({}, :f32)], compiler())

    assert_received {:called, :compile, []}
    assert compiled.(Nx.tensor([1.0, 2.0]), Nx.tensor(0.5)) == Nx.tensor([2.5, 4.5])
    assert compiled.(Nx.tensor([-1.0, 0.0]), Nx.tensor(1.0)) == Nx.tensor([-1.0, 1.0])
    refute_received {:called, _, _}

    # a static list among the templates, given at compile time only
    sum_rows =
      Nx.Defn.compile(&Fns.with_opts/2, [Nx.template({2, 2}, :s64), [axes: [1]]], compiler())

    assert sum_rows.(Nx.tensor([[1, 2], [3, 4]])) == Nx.tensor([3, 7])

    assert_raise ArgumentError, ~r/not compatible with compiled function template/, fn ->
      compiled.(Nx.tensor([1.0, 2.0, 3.0]), Nx.tensor(0.5))
    end
  end

  test "stream calls __stream__/7; each step runs on the wrapped compiler" do
    stream = Nx.Defn.stream(&Fns.running_sum/2, [Nx.template({}, :s64), 0], compiler())
    assert_received {:called, :stream, []}
    Nx.Stream.send(stream, 5)
    assert Nx.Stream.recv(stream) == Nx.tensor(0)
    Nx.Stream.send(stream, 7)
    assert Nx.Stream.recv(stream) == Nx.tensor(5)
    assert Nx.Stream.done(stream) == Nx.tensor(12)

    # an empty tuple is a container (an empty accumulator), not an option
    stream = Nx.Defn.stream(fn i, {} -> {Nx.multiply(i, i), {}} end, [0, {}], compiler())
    Nx.Stream.send(stream, 3)
    assert Nx.Stream.recv(stream) == Nx.tensor(9)
    assert Nx.Stream.done(stream) == {}
  end

  test "to_backend calls __to_backend__/1; NxJax's and Nx.Defn.Evaluator's follow the default backend" do
    assert Nx.Defn.to_backend(compiler()) == {Nx.BinaryBackend, [from: Wrapping]}
    assert_received {:called, :to_backend, []}
    assert NxJax.__to_backend__([]) == {Nx.BinaryBackend, []}
    assert Nx.Defn.to_backend(compiler: Nx.Defn.Evaluator) == {Nx.BinaryBackend, []}

    Nx.with_default_backend(NxJax.Backend, fn ->
      assert NxJax.__to_backend__([]) == {NxJax.Backend, []}
      assert Nx.Defn.to_backend(compiler: Nx.Defn.Evaluator) == {NxJax.Backend, []}
    end)

    assert Wrapping.__partitions_options__(a: 1) == [[a: 1], [a: 1]]
    # one partition per pool worker, pinned to it (test_elixir/serving_partitions_test.exs)
    assert NxJax.__partitions_options__(a: 1) ==
             for(i <- 0..(NxJax.Pool.size() - 1), do: [server: NxJax.Pool.name(i), a: 1])

    assert Nx.Defn.Evaluator.__partitions_options__(max_concurrency: 3) |> length() == 3
  end

  test "Nx.Defn.Evaluator is a compiler (running on the default one), and can be wrapped" do
    x = Nx.tensor([[1.0, 2.0], [3.0, 4.0]])
    expected = Nx.tensor([[3.0, 6.0], [9.0, 12.0]])

    assert Nx.Defn.jit(&Fns.affine/2, compiler: Nx.Defn.Evaluator, garbage_collect: true).(x, x) ==
             expected

    assert Nx.Defn.jit(&Fns.affine/2, compiler(inner: Nx.Defn.Evaluator)).(x, x) == expected
    assert_received {:called, :jit, []}

    assert Nx.Defn.jit(&Fns.affine/2, compiler(inner: Nx.Defn.Evaluator, double: true)).(x, x) ==
             Nx.multiply(expected, 2)

    compiled = Nx.Defn.compile(&Fns.affine/2, [x, 1.0], compiler(inner: Nx.Defn.Evaluator))

    assert compiled.(x, 1.0) == Nx.tensor([[3.0, 5.0], [7.0, 9.0]])

    stream = Nx.Defn.stream(&Fns.running_sum/2, [0.0, 0.0], compiler: Nx.Defn.Evaluator)

    Nx.Stream.send(stream, 1.5)
    assert Nx.Stream.recv(stream) == Nx.tensor(0.0)
    assert Nx.Stream.done(stream) == Nx.tensor(1.5)
  end

  test "a :compiler that is not a compiler is an ArgumentError that says why" do
    assert_raise ArgumentError, ~r/names Enum, which is not a compiler: .*no __jit__\/5/, fn ->
      Nx.Defn.jit(&Fns.affine/2, compiler: Enum).(1, 2)
    end

    assert_raise ArgumentError, ~r/names NoSuchCompiler, which is not loaded/, fn ->
      Nx.Defn.jit_apply(&Fns.affine/2, [1, 2], compiler: NoSuchCompiler)
    end

    assert_raise ArgumentError, ~r/which is not a compiler/, fn ->
      Nx.Defn.compile(&Fns.affine/2, [1, 2], compiler: Enum)
    end

    assert_raise ArgumentError, ~r/which is not a compiler/, fn ->
      Nx.Defn.stream(&Fns.running_sum/2, [0, 0], compiler: Enum)
    end

    assert_raise ArgumentError, "the :compiler option must be a module, got: 42", fn ->
      Nx.Defn.jit(&Fns.affine/2, compiler: 42).(1, 2)
    end
  end

  test "the default compiler keeps its own path: planned calls hit the trace cache" do
    f = Nx.Defn.jit(fn x, y -> Nx.subtract(Nx.multiply(x, 3), y) end)
    x = Nx.tensor([1.0, 2.0])
    before = Nx.Defn.Compiler.counters()

    for i <- 1..5 do
      assert f.(x, Nx.tensor(i * 1.0)) == Nx.tensor([3.0 - i, 6.0 - i])
    end

    later = Nx.Defn.Compiler.counters()
    assert later.traces - before.traces == 1
    assert later.trace_cache_hits - before.trace_cache_hits == 4
    # (the process keeps a plan of the repeated call)
    assert Enum.any?(Process.get(), &match?({{{Nx.Defn.Compiler, :plans}, _}, _}, &1))

    # naming the default compiler is the default path too
    assert Nx.Defn.jit(&Fns.affine/2, compiler: NxJax).(1.0, 1.0) == Nx.tensor(3.0)
  end
end
