defmodule NxJax.DefnEndToEndTest do
  # defn, jit and the Kernel, end to end on the worker.
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)

  import ExUnit.CaptureIO
  import Nx.Defn
  doctest Nx.Defn

  defn add_mul(a, b), do: a + b * 2
  defn folds(x), do: x * (2 * 3 - 1)
  defn negate(x), do: -x
  defn divide_power(x), do: 1 / x + x ** 2
  defn swap({a, b}), do: {b, a}
  defn map_arg(%{x: x, y: y}), do: %{sum: x + y, diff: x - y}
  defn with_opts(x, opts \\ []), do: x * then(opts, &Keyword.get(&1, :scale, 1))
  defn second(t), do: elem(t, 1)
  defn calls_private(x), do: double(x) + 1
  defnp double(x), do: x * 2
  defn constant_result(_x), do: 42.0
  defn mismatched(a, b), do: a + b
  defn printed(x), do: print_expr(Nx.exp(x))
  defn shapes(x), do: then(x, &Nx.shape/1)

  defn traced(x) do
    then(x, &send(self(), {:traced, &1.shape}))
    x * 2
  end

  defn relu(x), do: if(x > 0, do: x, else: 0.0)

  # operators in guards of case clauses inside defn, as Nx's defn_test.exs writes them
  defn guarded(opts \\ []) do
    case opts[:value] do
      value when value == -2 -> -1
      value when value == +2 -> 1
      {x, y} when x > y and x >= 3 -> 10
      _ -> 0
    end
  end

  # and negative and positive number literals as patterns
  defn matched(opts \\ []) do
    case opts[:value] do
      -2 -> -1
      +2 -> 1
      _ -> 0
    end
  end

  # a bodiless deftransform head before its clauses, as Nx's defn_test.exs writes one
  deftransform(pick(x \\ 1, y))
  deftransform(pick(1, y), do: y)
  deftransform(pick(x, _y), do: x)
  defn picked(a), do: a + pick(2)

  # defn heads with unquote fragments, as Nx's own test files write them
  for {name, factor} <- [times_two: 2, times_three: 3] do
    defn unquote(name)(x), do: x * unquote(factor)
  end

  defn sign(x) do
    cond do
      x < 0 -> -1.0
      x == 0 -> 0.0
      true -> 1.0
    end
  end

  defn maybe_double(x, opts \\ []) do
    if opts[:double], do: x * 2, else: x
  end

  defn compare(a, b), do: {a < b, a >= b, a == b, a != b}
  defn grad_relu(x), do: grad(x, &relu/1)

  # a regression (2026-12-06): the sites marked for debug_nans wrapped `Nx.unquote(op)`, the
  # computed function of a call with unquote fragments (Nx 0.7.2's defn_test), which then did
  # not compile
  dynamic_name = :dynamic_add_two
  operator = :add
  defn(unquote(dynamic_name)(left, right), do: Nx.unquote(operator)(left, right))

  describe "defn" do
    @tag :seam
    test "unquote fragments in the name and the body, as Nx's own tests write them" do
      assert dynamic_add_two(1, 2) == Nx.tensor(3)
    end

    @tag :seam
    test "runs on numbers and tensors and returns concrete tensors" do
      assert add_mul(1, 2) == Nx.tensor(5)
      assert add_mul(Nx.tensor([1.0, 2.0]), 3.0) == Nx.tensor([7.0, 8.0])
      assert %Nx.Tensor{data: %Nx.BinaryBackend{}} = add_mul(1.0, 2.0)
    end

    @tag :seam
    test "the Kernel operators fold numbers and use Nx for tensors" do
      assert folds(Nx.tensor([1, 2])) == Nx.tensor([5, 10])
      assert negate(Nx.tensor([1.0, -2.0])) == Nx.tensor([-1.0, 2.0])
      assert divide_power(2.0) == Nx.tensor(4.5)
    end

    @tag :seam
    test "takes and returns tuples and maps" do
      assert swap({Nx.tensor(1), Nx.tensor(2.0)}) == {Nx.tensor(2.0), Nx.tensor(1)}
      assert map_arg(%{x: 5, y: 3}) == %{sum: Nx.tensor(8), diff: Nx.tensor(2)}
      assert second({1, 2.0, 3}) == Nx.tensor(2.0)
    end

    @tag :seam
    test "passes non-tensor arguments as they are and supports defaults" do
      assert with_opts(2.0) == Nx.tensor(2.0)
      assert with_opts(2.0, scale: 3) == Nx.tensor(6.0)
    end

    @tag :seam
    test "inlines defn and defnp calls made from inside defn" do
      assert calls_private(Nx.tensor([1, 2])) == Nx.tensor([3, 5])
    end

    @tag :seam
    test "turns a number result into a tensor" do
      assert constant_result(1) == Nx.tensor(42.0)
    end

    @tag :seam
    test "raises shape errors at trace time" do
      assert_raise ArgumentError, fn -> mismatched(Nx.tensor([1, 2]), Nx.tensor([1, 2, 3])) end
    end

    test "if/2 and cond/1 select on tensor conditions" do
      assert relu(-2.0) == Nx.tensor(0.0)
      assert relu(Nx.tensor([-1.0, 3.0])) == Nx.tensor([0.0, 3.0])
      assert sign(Nx.tensor([-5.0, 0.0, 2.0])) == Nx.tensor([-1.0, 0.0, 1.0])
      assert grad_relu(3.0) == Nx.tensor(1.0)
      assert grad_relu(-3.0) == Nx.tensor(0.0)
    end

    @tag :seam
    test "if/2 on a non-tensor condition traces one branch" do
      assert maybe_double(3, double: false) == Nx.tensor(3)
      assert maybe_double(3, double: true) == Nx.tensor(6)
      # a missing option (nil) is refused, as in Nx 0.7.2 (its defn_test "evaluates boolean
      # predicates"); this test expected the else branch until 2026-12-02
      assert_raise CompileError, ~r/expects the predicate to be true, false, or a scalar/, fn ->
        maybe_double(3)
      end
    end

    @tag :seam
    test "comparison operators compare tensors element-wise" do
      assert compare(Nx.tensor([1, 2]), 2) ==
               {Nx.tensor([1, 0], type: {:u, 8}), Nx.tensor([0, 1], type: {:u, 8}),
                Nx.tensor([0, 1], type: {:u, 8}), Nx.tensor([1, 0], type: {:u, 8})}
    end

    @tag :seam
    test "then/2 runs Elixir on trace-time values (numbers come back as tensors)" do
      assert shapes(Nx.tensor([[1, 2, 3]])) == {Nx.tensor(1), Nx.tensor(3)}
    end

    test "traces once per argument signature" do
      assert traced(Nx.tensor([1, 2])) == Nx.tensor([2, 4])
      assert_received {:traced, {2}}
      assert traced(Nx.tensor([3, 4])) == Nx.tensor([6, 8])
      refute_received {:traced, _}
      assert traced(Nx.tensor([1, 2, 3])) == Nx.tensor([2, 4, 6])
      assert_received {:traced, {3}}
    end

    @tag :seam
    test "print_expr/1 prints the expression and returns it" do
      output = capture_io(fn -> assert printed(0.0) == Nx.tensor(1.0) end)
      assert output =~ "Nx.Defn.Expr"
      assert output =~ "parameter a:0"
      assert output =~ "b = exp a"
    end
  end

  describe "jit" do
    @tag :seam
    test "jit/2 returns a function of the same arity" do
      jitted = Nx.Defn.jit(fn a, b -> Nx.multiply(a, b) end)
      assert is_function(jitted, 2)
      assert jitted.(Nx.tensor([1, 2]), 3) == Nx.tensor([3, 6])
      assert Nx.Defn.jit(&add_mul/2).(1, 1) == Nx.tensor(3)
    end

    @tag :seam
    test "jit_apply/3 applies right away" do
      assert Nx.Defn.jit_apply(&Nx.add/2, [1.0, 2.0]) == Nx.tensor(3.0)
    end

    @tag :seam
    test "an expression inspected inside jit shows the listing" do
      # (a string is not a result, as in Nx: the listing leaves the trace in a message)
      Nx.Defn.jit(fn x ->
        y = Nx.log1p(Nx.exp(x))
        send(self(), {:listing, inspect(y)})
        y
      end).(1.0)

      assert_received {:listing, listing}
      assert listing =~ "#Nx.Tensor<"
      assert listing =~ "c = log1p b"
    end

    @tag :seam
    test "a container without tensors comes back unchanged" do
      assert Nx.Defn.jit(fn _x -> {:ok, []} end).(1.0) == {:ok, []}
    end

    @tag :seam
    test "an expression that escapes its trace cannot run" do
      escaped = Nx.Defn.jit(fn x -> send(self(), {:escaped, x}) && x end)
      escaped.(1.0)
      assert_received {:escaped, expr}

      assert_raise ArgumentError, ~r/escaped its defn/, fn ->
        Nx.Defn.jit(&Nx.add/2).(expr, 1.0)
      end
    end

    @tag :seam
    test "a template argument the graph reads cannot run, in Nx's words" do
      message = "cannot perform operations on a Nx.TemplateBackend tensor"
      template = Nx.template({3}, :f32)

      assert_raise RuntimeError, message, fn -> Nx.Defn.jit(&Nx.add/2).(template, 1.0) end

      assert_raise RuntimeError, message, fn ->
        Nx.Defn.jit(&Nx.slice(&1, [&2], [1])).(Nx.tensor([1, 2, 3]), Nx.template({}, :s32))
      end

      # an argument the result does not read is not needed
      assert Nx.Defn.jit(fn a, _b -> Nx.exp(a) end).(0.0, template) == Nx.tensor(1.0)
    end
  end

  describe "eager ops" do
    test "run one-node graphs on the worker outside defn" do
      assert Nx.exp(Nx.tensor(0.0)) == Nx.tensor(1.0)
      assert Nx.add(Nx.tensor([1, 2]), 1) == Nx.tensor([2, 3])
    end
  end

  @tag :seam
  test "defn heads may be unquote fragments (defined in a for)" do
    assert times_two(Nx.tensor(5)) == Nx.tensor(10)
    assert times_three(Nx.tensor(5)) == Nx.tensor(15)
  end

  describe "Nx.Defn's other entry points (as Nx 0.7.2's)" do
    test "grad/1 and value_and_grad/1 return functions" do
      assert Nx.Defn.grad(&Nx.sin/1).(Nx.tensor(0.0)) == Nx.tensor(1.0)

      assert Nx.Defn.value_and_grad(&Nx.exp/1).(Nx.tensor(0.0)) ==
               {Nx.tensor(1.0), Nx.tensor(1.0)}
    end

    test "debug_expr returns the traced expression and runs nothing" do
      parent = self()
      ran = fn _ -> send(parent, :ran) end

      expr =
        Nx.Defn.debug_expr(fn a, b ->
          {Nx.multiply(a, b), Nx.Defn.Kernel.hook(Nx.exp(a), ran)}
        end).(2.0, Nx.tensor([1.0, 2.0]))

      assert {%Nx.Tensor{data: %Nx.Defn.Expr{op: :multiply}, shape: {2}}, %Nx.Tensor{} = hooked} =
               expr

      assert %Nx.Defn.Expr{} = hooked.data
      # the hook would run on the worker's result: nothing ran
      refute_received :ran
      assert Nx.Defn.jit(fn a -> Nx.Defn.Kernel.hook(Nx.exp(a), ran) end).(0.0) == Nx.tensor(1.0)
      assert_receive :ran
    end

    @tag :seam
    test "compile/3 checks its arguments against the templates" do
      scale =
        Nx.Defn.compile(fn x, {a, b} -> Nx.add(Nx.multiply(x, a), b) end, [
          Nx.template({2}, :f32),
          {Nx.template({}, :f32), Nx.template({}, :f32)}
        ])

      assert scale.(Nx.tensor([1.0, 2.0]), {Nx.tensor(2.0), Nx.tensor(1.0)}) ==
               Nx.tensor([3.0, 5.0])

      # Nx 0.7.2's messages
      assert_raise ArgumentError,
                   ~r/argument at position 1 is not compatible with compiled function template/,
                   fn ->
                     scale.(Nx.tensor([1, 2]), {Nx.tensor(2.0), Nx.tensor(1.0)})
                   end

      assert_raise ArgumentError,
                   ~r/cannot invoke compiled function because the given arguments do not match/,
                   fn -> scale.(Nx.tensor([1.0, 2.0]), 3.0) end

      # a list among the templates is static: not an argument of the compiled function
      sum_rows = Nx.Defn.compile(&Nx.sum/2, [Nx.template({2, 2}, :s64), [axes: [1]]])
      assert sum_rows.(Nx.iota({2, 2})) == Nx.tensor([1, 5])
    end
  end

  @tag :seam
  test "a bodiless deftransform head gives the defaults of its clauses" do
    assert pick(5) == 5
    assert pick(3, 4) == 3
    assert picked(Nx.tensor(1)) == Nx.tensor(3)
  end

  # (Enum is not callable from defn, as in Nx 0.7.2: a transform calls it)
  defn sum_all(a, b, c), do: reduce_all([a, b, c], &+/2) * 2
  deftransformp(reduce_all(list, fun), do: Enum.reduce(list, fun))

  # as in Nx 0.7.2: + - * / are functions (captured as `&+/2`), the comparisons and unary
  # minus are macros (Kernel's in guards)
  defn nested_jit(opts \\ []), do: nested_jit_transform(opts)

  deftransformp nested_jit_transform(opts) do
    eleven = Nx.tensor(11)
    Nx.Defn.jit(&Nx.Defn.Kernel.*/2, opts).(eleven, eleven)
  end

  defn nested_reuse(x), do: nested_reuse_transform(x)
  deftransformp(nested_reuse_transform(x), do: Nx.Defn.jit(&Nx.exp/1, on_conflict: :reuse).(x))

  # Nx 0.7.2: a jit while another function is traced raises unless :on_conflict says
  @tag :seam
  test "a nested jit raises, runs now (:force) or joins the trace (:reuse)" do
    assert_raise RuntimeError,
                 "cannot invoke JITed function when there is a JIT compilation happening",
                 fn -> nested_jit() end

    assert nested_jit(on_conflict: :force) == Nx.tensor(121)
    assert nested_reuse(Nx.tensor(0.0)) == Nx.tensor(1.0)

    assert_raise ArgumentError, ~r/:on_conflict option must be/, fn ->
      Nx.Defn.jit(&Nx.exp/1, on_conflict: :later).(1.0)
    end
  end

  defn compiled_by(x), do: report_compiler(x)

  deftransformp report_compiler(x) do
    send(self(), {:compiler, Nx.Defn.Compiler.current()})
    x
  end

  test "Nx.Defn.Compiler.current/0 names the compiler of the trace; results must be data" do
    assert Nx.Defn.Compiler.current() == nil
    compiled_by(Nx.tensor(1))
    assert_received {:compiler, NxJax}
    Nx.Defn.jit(&compiled_by/1, compiler: Nx.Defn.Evaluator).(Nx.tensor(2))
    assert_received {:compiler, Nx.Defn.Evaluator}

    assert_raise Protocol.UndefinedError, ~r/must return tensors, numbers or containers/, fn ->
      Nx.Defn.jit(fn -> :ok end).()
    end
  end

  @tag :seam
  test "the arithmetic operators can be captured" do
    assert sum_all(Nx.tensor([1, 2]), 3, Nx.tensor([10, 20])) == Nx.tensor([28, 50])
    assert Nx.Defn.jit(&Nx.Defn.Kernel.*/2).(Nx.tensor([2, 3]), 4) == Nx.tensor([8, 12])
  end

  @tag :seam
  test "operators in guards are Kernel's, outside guards tensor-aware" do
    assert guarded(value: -2) == Nx.tensor(-1)
    assert guarded(value: 2) == Nx.tensor(1)
    assert guarded(value: {5, 1}) == Nx.tensor(10)
    assert guarded(value: {2, 1}) == Nx.tensor(0)
    assert matched(value: -2) == Nx.tensor(-1)
    assert matched(value: 2) == Nx.tensor(1)
    assert matched(value: 3) == Nx.tensor(0)
  end

  describe "default options and the :compiler option" do
    test "default_options/1 sets the process's defaults and returns the previous ones" do
      assert Nx.Defn.default_options() == []
      assert Nx.Defn.default_options(compiler: Nx.Defn.Debug) == []
      assert Nx.Defn.default_options() == [compiler: Nx.Defn.Debug]

      # Nx.Defn.Debug: a defn call returns the traced expression, nothing runs
      assert %Nx.Tensor{data: %Nx.Defn.Expr{op: :add}, shape: {2}} =
               add_mul(Nx.tensor([1, 2]), Nx.tensor([3, 4]))

      assert Nx.Defn.default_options([]) == [compiler: Nx.Defn.Debug]
      assert add_mul(Nx.tensor([1, 2]), Nx.tensor([3, 4])) == Nx.tensor([7, 10])
    after
      Nx.Defn.default_options([])
    end

    # as Nx 0.7.2's compilers: a number returned is a constant expression, and a constant
    # is one expression per value, type and shape (Nx's defn_test compares them with ==)
    test "Nx.Defn.Debug returns numbers as constant expressions" do
      debug = Nx.Defn.jit(fn _x -> {0, 2.5} end, compiler: Nx.Defn.Debug)
      assert debug.(Nx.tensor(1)) == {Nx.Defn.Expr.tensor(0), Nx.Defn.Expr.tensor(2.5)}

      assert %Nx.Tensor{type: {:s, 64}, data: %Nx.Defn.Expr{op: :constant}} =
               Nx.Defn.Expr.tensor(0)

      refute Nx.Defn.Expr.tensor(0) == Nx.Defn.Expr.tensor(1)
    end

    test "another compiler is called as Nx calls one; a module that is not one is an error" do
      # Nx.Defn.Evaluator runs on the default compiler; its own options are its own
      jitted = Nx.Defn.jit(&add_mul/2, compiler: Nx.Defn.Evaluator, garbage_collect: true)
      assert jitted.(Nx.tensor([1, 2]), 3) == Nx.tensor([7, 8])
      assert jitted.(Nx.tensor([0, 0]), 1) == Nx.tensor([2, 2])

      previous = Nx.Defn.default_options(compiler: Nx.Defn.Evaluator)
      assert add_mul(1, 2) == Nx.tensor(5)
      Nx.Defn.default_options(previous)

      # (EXLA is not loaded here)
      assert_raise ArgumentError, ~r/names EXLA, which is not loaded/, fn ->
        Nx.Defn.jit(&add_mul/2, compiler: EXLA, client: :cuda).(1, 2)
      end

      assert_raise ArgumentError, "the :compiler option must be a module, got: 42", fn ->
        Nx.Defn.jit(&add_mul/2, compiler: 42).(1, 2)
      end
    end
  end
end
