defmodule Nx.Defn.WireEncoderTest do
  # Pure tests of the expression layer and Nx.Defn.WireEncoder: no worker, no Nx ops.
  use ExUnit.Case, async: true

  alias Nx.Defn.{Composite, Expr, Grad}
  alias Nx.Defn.WireEncoder

  # (compatible?/3's example builds tensors with Nx.iota/1: test_elixir/nx_doctest_test.exs)
  doctest Nx.Defn.Composite, except: [compatible?: 3]
  doctest Nx.Defn.WireEncoder
  doctest Nx.Defn.Expr
  doctest Nx.Defn.Kernel
  doctest Nx.Defn.Compiler

  @f32 {:f, 32}

  defp param(index, shape \\ {}, type \\ @f32), do: Expr.parameter(index, type, shape)
  defp unary(op, x), do: Expr.expr(op, [x], %{}, x)
  defp binary(op, x, y), do: Expr.expr(op, [x, y], %{}, x)

  # log1p(exp(t)) built by hand, as Nx.log1p(Nx.exp(t)) would build it.
  defp log1pexp(t), do: unary(:log1p, unary(:exp, t))

  defp assert_topological({:nx_jax_graph, 1, nodes, outputs}) do
    Enum.each(Enum.with_index(nodes), fn {{id, _op, inputs, opts, _out}, index} ->
      assert id == index
      refs = inputs ++ Enum.flat_map([:wrt, :cotangents, :grads], &Map.get(opts, &1, []))
      assert Enum.all?(refs, &(&1 < id)), "node #{id} refers to #{inspect(refs)}"
    end)

    assert Enum.all?(outputs, &(&1 < length(nodes)))
  end

  describe "encode/1" do
    test "emits the version-1 graph with parameters first and the output last" do
      {graph, parameters, container} = WireEncoder.encode(log1pexp(param(0)))

      assert graph ==
               {:nx_jax_graph, 1,
                [
                  {0, :parameter, [], %{index: 0}, {@f32, {}}},
                  {1, :exp, [0], %{}, {@f32, {}}},
                  {2, :log1p, [1], %{}, {@f32, {}}}
                ], [2]}

      assert parameters == [0]
      assert %Nx.Tensor{data: nil, type: @f32, shape: {}} = container
    end

    test "is deterministic: two traces of the same function give identical bytes" do
      build = fn ->
        x = param(0, {3})
        y = param(1, {3})
        shared = binary(:multiply, x, y)
        {binary(:add, shared, unary(:exp, shared)), %{b: shared, a: unary(:sin, y)}}
      end

      {g1, p1, _} = WireEncoder.encode(build.())
      {g2, p2, _} = WireEncoder.encode(build.())
      assert :erlang.term_to_binary(g1) == :erlang.term_to_binary(g2)
      assert p1 == p2
    end

    test "numbers nodes in topological order and shares repeated nodes" do
      x = param(0)
      shared = unary(:exp, x)
      y = binary(:add, binary(:multiply, shared, shared), unary(:sin, shared))
      {{:nx_jax_graph, 1, nodes, [out]} = graph, _, _} = WireEncoder.encode(y)

      assert_topological(graph)
      assert Enum.count(nodes, &match?({_, :exp, _, _, _}, &1)) == 1
      assert Enum.count(nodes, &match?({_, :parameter, _, _, _}, &1)) == 1
      assert out == length(nodes) - 1
    end

    test "keeps only the parameters the outputs use and renumbers them" do
      _unused = param(0)
      used = param(2, {2})
      {{:nx_jax_graph, 1, nodes, _}, parameters, _} = WireEncoder.encode(unary(:exp, used))

      assert parameters == [2]
      assert [{0, :parameter, [], %{index: 0}, {@f32, {2}}} | _] = nodes
    end

    test "flattens containers in order and rebuilds them from the results" do
      x = param(0)
      y = param(1)
      outputs = {unary(:exp, x), %{b: y, a: unary(:sin, y)}}
      {{:nx_jax_graph, 1, nodes, output_ids}, _, container} = WireEncoder.encode(outputs)

      ops = Enum.map(output_ids, fn id -> nodes |> Enum.at(id) |> elem(1) end)
      assert ops == [:exp, :sin, :parameter]
      assert WireEncoder.rebuild(container, [1, 2, 3]) == {1, %{a: 2, b: 3}}
    end

    test "turns numbers and concrete tensors in the outputs into leaves" do
      concrete = %Nx.Tensor{
        data: %Nx.BinaryBackend{state: <<1::8, 2::8>>},
        type: {:u, 8},
        shape: {2},
        names: [nil]
      }

      {{:nx_jax_graph, 1, nodes, [0, 1]}, [], _} = WireEncoder.encode({2.0, concrete})

      assert nodes == [
               {0, :constant, [], %{value: 2.0}, {@f32, {}}},
               {1, :tensor, [], %{data: <<1, 2>>}, {{:u, 8}, {2}}}
             ]
    end

    test "a concrete scalar input becomes a :constant node" do
      two = %Nx.Tensor{
        data: %Nx.BinaryBackend{state: <<2::signed-64-native>>},
        type: {:s, 64},
        shape: {},
        names: []
      }

      assert %Nx.Tensor{data: %Expr{op: :constant, opts: %{value: 2}}} = Expr.to_expr(two)
    end
  end

  describe "metadata" do
    test "stop_grad is metadata on the wire as :stop_grad" do
      x = param(0)
      y = Expr.metadata(unary(:exp, x), %{stop_grad: true})
      assert %Expr{op: :metadata, opts: %{metadata: %{stop_grad: true}}} = y.data

      {{:nx_jax_graph, 1, nodes, [2]}, _, _} = WireEncoder.encode(y)
      assert {2, :stop_grad, [1], %{}, {@f32, {}}} = List.last(nodes)
    end

    test "other metadata becomes :metadata listing its sorted keys" do
      y = Expr.metadata(param(0), %{oops: true, another: 1})
      {{:nx_jax_graph, 1, nodes, _}, _, _} = WireEncoder.encode(y)
      assert {1, :metadata, [0], %{keys: [:another, :oops]}, {@f32, {}}} = List.last(nodes)
    end

    test "metadata over a tuple wraps each element" do
      {a, b} = Expr.metadata({param(0), param(1)}, %{stop_grad: true})
      assert a.data.op == :metadata and b.data.op == :metadata
    end
  end

  describe "custom_grad" do
    test "calls the function on a cotangent and ships its result by id" do
      t = param(0)
      y = Grad.custom_grad(log1pexp(t), [t], fn g -> [binary(:multiply, g, t)] end)
      {{:nx_jax_graph, 1, nodes, [out]} = graph, _, _} = WireEncoder.encode(y)

      assert_topological(graph)
      {^out, :custom_grad, [log1p], opts, {@f32, {}}} = Enum.at(nodes, out)
      assert opts.tuple == false
      assert [0] == opts.wrt
      assert [cot] = opts.cotangents
      assert {^cot, :cotangent, [], %{}, {@f32, {}}} = Enum.at(nodes, cot)
      assert [grad] = opts.grads
      assert {^grad, :multiply, [^cot, 0], %{}, _} = Enum.at(nodes, grad)
      assert {^log1p, :log1p, _, _, _} = Enum.at(nodes, log1p)
    end

    test "over a tuple gives one tuple-valued node, a tuple of cotangents and :elem nodes" do
      t = param(0)
      u = param(1, {2})

      {a, b} =
        Grad.custom_grad({unary(:exp, t), unary(:sin, u)}, [t, u], fn {ga, gb} ->
          assert ga.data.op == :cotangent and gb.shape == {2}
          [ga, gb]
        end)

      {{:nx_jax_graph, 1, nodes, [ia, ib]} = graph, _, _} = WireEncoder.encode({a, b})
      assert_topological(graph)
      assert {^ia, :elem, [node], %{index: 0}, {@f32, {}}} = Enum.at(nodes, ia)
      assert {^ib, :elem, [^node], %{index: 1}, {@f32, {2}}} = Enum.at(nodes, ib)
      assert {^node, :custom_grad, [_, _], opts, [{@f32, {}}, {@f32, {2}}]} = Enum.at(nodes, node)
      assert opts.tuple == true
      assert length(opts.cotangents) == 2 and length(opts.grads) == 2
    end

    test "broadcasts gradients to the input's shape and casts them to its type" do
      t = param(0, {2, 3}, {:f, 64})
      y = Grad.custom_grad(unary(:exp, t), [t], fn _g -> [param(1, {3})] end)
      %{custom_grad: {_, _, [grad]}} = y.data.opts.metadata

      assert %Nx.Tensor{type: {:f, 64}, shape: {2, 3}, data: %Expr{op: :as_type, args: [b]}} =
               grad

      assert %Nx.Tensor{shape: {2, 3}, data: %Expr{op: :broadcast, opts: %{axes: [1]}}} = b

      y = Grad.custom_grad(unary(:exp, t), [t], fn _g -> [1.0] end)
      %{custom_grad: {_, _, [one]}} = y.data.opts.metadata
      assert %Nx.Tensor{type: {:f, 64}, shape: {2, 3}, data: %Expr{op: :constant}} = one
    end

    test "raises ArgumentError naming the fix when the function returns something else" do
      t = param(0)

      assert_raise ArgumentError,
                   ~r/must return a list with one gradient per input.*Wrap a single/s,
                   fn ->
                     Grad.custom_grad(unary(:exp, t), [t], fn g -> g end)
                   end

      assert_raise ArgumentError, ~r/one gradient per input \(1 here/, fn ->
        Grad.custom_grad(unary(:exp, t), [t], fn g -> [g, g] end)
      end

      v = param(1, {3})

      assert_raise ArgumentError,
                   ~r/shape \{2\}, which cannot be broadcast to its input's shape \{3\}/,
                   fn ->
                     Grad.custom_grad(unary(:exp, v), [v], fn _g -> [param(2, {2})] end)
                   end

      assert_raise ArgumentError, ~r/must be a tensor or a number/, fn ->
        Grad.custom_grad(unary(:exp, t), [t], fn _g -> [:oops] end)
      end

      assert_raise ArgumentError, ~r/non-empty list of tensors/, fn ->
        Grad.custom_grad(unary(:exp, t), t, fn g -> [g] end)
      end
    end
  end

  describe "grad" do
    test "builds a :grad node [y | xs] with a tuple out and :elem nodes" do
      x = param(0)
      w = param(1, {2})
      {value, {gx, gw}} = Grad.value_and_grad({x, w}, fn {x, _w} -> unary(:sin, x) end)

      {{:nx_jax_graph, 1, nodes, [iv, igx, igw]} = graph, _, _} =
        WireEncoder.encode({value, gx, gw})

      assert_topological(graph)
      assert {^igx, :elem, [g], %{index: 0}, {@f32, {}}} = Enum.at(nodes, igx)
      assert {^igw, :elem, [^g], %{index: 1}, {@f32, {2}}} = Enum.at(nodes, igw)
      # a function is differentiated with respect to its own copies of x and w (identity
      # metadata nodes: a value the function captures from outside is a constant, as in Nx)
      assert {^g, :grad, [^iv, ix, iw], %{}, [{@f32, {}}, {@f32, {2}}]} = Enum.at(nodes, g)
      assert {^ix, :metadata, [0], %{keys: [:grad_input]}, {@f32, {}}} = Enum.at(nodes, ix)
      assert {^iw, :metadata, [iwp], %{keys: [:grad_input]}, {@f32, {2}}} = Enum.at(nodes, iw)
      assert {^iwp, :parameter, [], %{index: 1}, {@f32, {2}}} = Enum.at(nodes, iwp)
    end

    test "accepts an expression already built from x and maps of tensors" do
      x = param(0)
      {_, %{x: gx}} = Grad.value_and_grad(%{x: x}, log1pexp(x))
      assert %Expr{op: :elem, args: [%Nx.Tensor{data: %Expr{op: :grad}}]} = gx.data
    end

    # Nx 0.7.2 seeds a non-scalar y with ones: the graph differentiates its sum
    test "differentiates a non-scalar y as its sum; a tuple y raises at trace time" do
      x = param(0, {3})
      {_, gx} = Grad.value_and_grad(x, fn x -> unary(:exp, x) end)
      assert %Expr{op: :elem, args: [%Nx.Tensor{data: %Expr{op: :grad, args: [y | _]}}]} = gx.data
      assert %Nx.Tensor{shape: {}, data: %Expr{op: :sum}} = y

      assert_raise ArgumentError, ~r/use value_and_grad\/3 with a transform/, fn ->
        Grad.value_and_grad(param(0), fn x -> {x, x} end)
      end
    end

    # as Nx 0.7.2: an integer x is differentiated as a float (a second trace on an f32 copy)
    test "an integer x is differentiated through a floating copy; an expression y refuses it" do
      x = param(0, {}, {:s, 64})
      {value, g} = Grad.value_and_grad(x, fn x -> x end)
      assert %Nx.Tensor{type: {:s, 64}} = value
      assert %Nx.Tensor{type: {:f, 32}, data: %Expr{op: :elem}} = g

      assert_raise ArgumentError,
                   ~r/with an expression \(not a function\).*got one of type s64.*Nx.as_type/,
                   fn -> Grad.value_and_grad(x, x) end
    end

    test "value_and_grad/3 differentiates what the transform picks" do
      x = param(0)

      {{loss, aux}, g} =
        Grad.value_and_grad(x, fn x -> {unary(:exp, x), param(1, {4})} end, &elem(&1, 0))

      assert loss.data.op == :exp and aux.shape == {4}

      assert %Expr{op: :elem, args: [%Nx.Tensor{data: %Expr{op: :grad, args: [^loss, own_x]}}]} =
               g.data

      assert %Expr{op: :metadata, args: [^x]} = own_x.data
    end
  end

  describe "tracing" do
    test "apply_op builds expressions while tracing, turning concrete inputs into leaves" do
      two = %Nx.Tensor{
        data: %Nx.BinaryBackend{state: <<2.0::float-32-native>>},
        type: @f32,
        shape: {},
        names: []
      }

      out = Expr.template(@f32, {})
      y = Expr.with_tracing(fn -> Expr.apply_op(:add, [two, 1.0], %{}, out) end)

      assert %Expr{op: :add, args: [a, b]} = y.data
      assert a.data.op == :constant and a.data.opts == %{value: 2.0}
      assert b.data.opts == %{value: 1.0}
      refute Expr.tracing?()
    end

    test "Composite walks tensors and numbers only" do
      assert Composite.flatten_list([{1, [2]}, %{a: 3.0}, :opt]) == [1, 3.0]
    end
  end

  describe "inspect/2" do
    test "lists parameters and one line per node with types" do
      x = param(0, {2})
      y = Expr.metadata(log1pexp(x), %{stop_grad: true})

      assert Expr.inspect(y, %Inspect.Opts{}) ==
               """
               Nx.Defn.Expr
               parameter a:0    f32[2]
               b = exp a        f32[2]
               c = log1p b      f32[2]
               d = stop_grad c  f32[2]\
               """
    end

    test "prints scalar constants inline" do
      x = param(0)
      y = binary(:multiply, x, Expr.constant(2.0, @f32, {}))

      assert Expr.inspect(y, %Inspect.Opts{}) ==
               "Nx.Defn.Expr\nparameter a:0        f32\nb = multiply a, 2.0  f32"
    end
  end

  describe "the wire's decisions" do
    test "an integer constant that does not fit its type travels as the low bits Nx keeps" do
      for {value, type, wired} <- [
            {2 ** 200 + 5, {:s, 64}, 5},
            {2 ** 10_000 - 1, {:s, 64}, -1},
            {2 ** 64 + 7, {:u, 8}, 7},
            {-(2 ** 70) - 1, {:s, 32}, -1},
            {2 ** 63, {:s, 64}, -(2 ** 63)},
            {300, {:u, 8}, 44},
            {2 ** 63 - 1, {:s, 64}, 2 ** 63 - 1}
          ] do
        {nodes, _} =
          WireEncoder.nodes(binary(:add, param(0, {}, type), Expr.constant(value, type, {})))

        assert [{_, :constant, [], %{value: ^wired}, _}] =
                 Enum.filter(nodes, &(elem(&1, 1) == :constant))
      end
    end

    test "a comparison carries the type its inputs meet in" do
      x = param(0, {}, {:u, 8})
      y = param(1, {}, {:s, 8})
      cmp = Expr.expr(:less, [x, y], %{}, Nx.template({}, {:u, 8}))
      {nodes, [out]} = WireEncoder.nodes(cmp)
      assert {^out, :less, [_, _], %{operand_type: {:s, 16}}, _} = List.last(nodes)
    end
  end
end
