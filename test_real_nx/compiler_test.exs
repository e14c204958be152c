defmodule NxJax.RealNx.CompilerTest do
  # NxJax as real Nx 0.7.2's compiler: each function runs under `compiler: NxJax` and under
  # real Nx's evaluator, and the two results agree
  use ExUnit.Case, async: true

  import NxJax.RealNxCase
  import Nx.Defn

  defn elementwise(x, y) do
    a = Nx.exp(x) * y - Nx.sin(x) / (1 + Nx.abs(y))
    b = Nx.max(x, y) + Nx.pow(Nx.abs(x), 1.5) + Nx.erf(x) + Nx.atan2(x, y)
    c = Nx.select(x > y, Nx.log1p(Nx.abs(x)), Nx.tanh(y))
    {a, b, c, Nx.as_type(x * 10, :s32), Nx.remainder(Nx.as_type(x * 10, :s32), 3), x == y}
  end

  defn reductions(x) do
    {Nx.sum(x), Nx.sum(x, axes: [1]), Nx.reduce_max(x, axes: [0], keep_axes: true),
     Nx.product(x, axes: [0, 2]), Nx.mean(x, axes: [-1]), Nx.argmax(x, axis: 1),
     Nx.argmin(x, axis: 2, tie_break: :high, keep_axis: true), Nx.all(x > 0, axes: [0]),
     Nx.any(x > 0.5), Nx.logsumexp(x, axes: [1])}
  end

  defn dots(a, b, batch_a, batch_b) do
    {Nx.dot(a, b), Nx.dot(batch_a, [2], [0], batch_b, [1], [0]), Nx.outer(a[0], b[0])}
  end

  defn shapes(x) do
    {Nx.reshape(x, {6, 4}), Nx.transpose(x, axes: [2, 0, 1]), Nx.slice(x, [0, 1, 1], [2, 2, 2]),
     Nx.slice(x, [0, 0, 0], [2, 3, 4], strides: [1, 2, 3]),
     Nx.put_slice(x, [1, 0, 2], Nx.broadcast(9.0, {1, 2, 2})), x[[.., 1, 2..3]],
     Nx.reverse(x, axes: [1]), Nx.pad(x, 0.5, [{1, 0, 0}, {0, 1, 1}, {-1, 0, 0}]),
     Nx.concatenate([x, x * 2], axis: 1), Nx.squeeze(Nx.new_axis(x, 0)), Nx.tile(x, [1, 2, 1]),
     Nx.broadcast(x[0], {3, 3, 4}), Nx.stack([x, Nx.as_type(x, :s32)], axis: 1)}
  end

  defn dynamic(x, i, j) do
    {Nx.slice(x, [i, j], [2, 2]), Nx.put_slice(x, [j, i], Nx.tensor([[-1.0, -2.0]])), x[i],
     Nx.slice_along_axis(x, j, 2, axis: 1)}
  end

  defn indexing(x, idx, idx2) do
    {Nx.take(x, idx, axis: 1), Nx.gather(x, idx2),
     Nx.take_along_axis(x, Nx.argsort(x, axis: 1), axis: 1),
     Nx.indexed_add(x, idx2, Nx.tensor([1.0, 2.0, 3.0])),
     Nx.indexed_put(x, idx2, Nx.tensor([7.0, 8.0, 9.0]))}
  end

  defn sorting(x) do
    {Nx.sort(x, axis: 1), Nx.sort(x, axis: 0, direction: :desc), Nx.argsort(x, axis: 1),
     Nx.argsort(x, axis: 1, direction: :desc), Nx.top_k(x[0], k: 2)}
  end

  defn convs(input, kernel) do
    {Nx.conv(input, kernel), Nx.conv(input, kernel, strides: [2, 1], padding: :same),
     Nx.conv(input, kernel, kernel_dilation: [1, 2], padding: [{1, 1}, {2, 0}])}
  end

  defn windows(x) do
    {Nx.window_sum(x, {2, 2}), Nx.window_max(x, {2, 3}, strides: [1, 2], padding: :same),
     Nx.window_min(x, {3, 1}, padding: [{1, 1}, {0, 0}]), Nx.window_mean(x, {2, 2}),
     Nx.window_scatter_max(x, Nx.iota({1, 2}, type: :f32), 0.0, {2, 3}, strides: [2, 3]),
     Nx.cumulative_sum(x, axis: 1), Nx.cumulative_max(x, axis: 0, reverse: true),
     Nx.window_reduce(x, 1.0, {2, 2}, fn a, b -> a * b + 0 end)}
  end

  defn reducers(x) do
    {Nx.reduce(x, 0.0, [axes: [1]], fn a, b -> a + b * b end),
     Nx.reduce(x, 1.0, fn a, b -> Nx.max(a, b) end)}
  end

  defn conds(x, y) do
    # the branches read x and y from outside (captures), and a value both branches read
    shared = Nx.exp(y)

    a =
      if Nx.sum(x) > 0 do
        x * shared + 1
      else
        x - shared
      end

    b =
      cond do
        x[0] > 2 -> {x * 2, y}
        x[0] > 0 -> {Nx.sqrt(Nx.abs(x)), y + Nx.sum(x)}
        true -> {x - 1, Nx.negate(y)}
      end

    {a, b}
  end

  defn nested_cond(x) do
    if x[0] > 0 do
      z = x * 3

      if x[1] > 0 do
        z + x
      else
        z - Nx.sum(x)
      end
    else
      x
    end
  end

  defn loop(x, n) do
    {x, _n, i} =
      while {x, n, i = 0}, i < n do
        {x * 2 + 1, n, i + 1}
      end

    {x, i}
  end

  defn single_state_loop(x) do
    while(x, Nx.sum(x) < 100, do: x * 3)
  end

  defn loop_with_cond(x) do
    {x, _} =
      while {x, i = 0}, i < 5 do
        x = if Nx.sum(x) > 10, do: x - 1, else: x * 2
        {x, i + 1}
      end

    x
  end

  defn mlp_loss(params, x, y) do
    h = Nx.tanh(Nx.dot(x, params.w1) + params.b1)
    out = Nx.dot(h, params.w2) + params.b2
    Nx.mean((out - y) ** 2)
  end

  defn mlp_grad(params, x, y), do: value_and_grad(params, &mlp_loss(&1, x, y))

  defn log1pexp(t), do: Nx.log1p(Nx.exp(t))

  defn custom_log1pexp(t) do
    custom_grad(log1pexp(t), [t], fn g -> [g * (1 - 1 / (1 + Nx.exp(t)))] end)
  end

  defn grad_custom(t), do: grad(t, &custom_log1pexp/1)
  defn grad_plain(t), do: grad(t, &log1pexp/1)
  defn grad_stop(t), do: grad(t, fn t -> t * stop_grad(t * 3) + t end)

  defn linalg(a, b) do
    {Nx.LinAlg.determinant(a), Nx.LinAlg.solve(a, b), Nx.LinAlg.qr(a),
     Nx.LinAlg.cholesky(Nx.dot(a, Nx.transpose(a))),
     Nx.LinAlg.triangular_solve(a, b, lower: false)}
  end

  defn containers(%{a: a, b: {b, c}}), do: %{sum: a + b, pair: {c * 2, Nx.sum(a)}}

  defn integers(x), do: {x * 3 + 2, Nx.bitwise_and(x, 6), Nx.left_shift(x, 1), x > 2, x + 300}

  defn non_finite(x) do
    {x + Nx.Constants.nan(), x * Nx.Constants.infinity(),
     Nx.is_infinity(x + Nx.Constants.neg_infinity()), x + Nx.tensor([1.0, 2.0])}
  end

  defn iota_eye(x), do: {x + Nx.iota({3, 3}), Nx.eye(3) * x, Nx.iota({2, 3}, axis: 1)}

  test "element-wise ops, comparisons and conversions" do
    x = Nx.tensor([[0.5, -1.2, 2.0], [3.0, 0.0, -0.7]])
    y = Nx.tensor([[1.0, 2.0, -3.0], [0.25, 0.0, 4.0]])
    assert_same(&elementwise/2, [x, y])
  end

  test "reductions with axes and keep_axes" do
    x = Nx.iota({2, 3, 4}, type: :f32) |> Nx.divide(7) |> Nx.sin()
    assert_same(&reductions/1, [x])
  end

  test "dot, with batch axes" do
    a = Nx.iota({2, 3}, type: :f32)
    b = Nx.iota({3, 4}, type: :f32) |> Nx.subtract(5)
    ba = Nx.iota({2, 3, 4}, type: :f32) |> Nx.divide(3)
    bb = Nx.iota({2, 4, 5}, type: :f32) |> Nx.cos()
    assert_same(&dots/4, [a, b, ba, bb])
  end

  test "reshape, transpose, slice, put_slice, pad, concatenate, broadcast" do
    x = Nx.iota({2, 3, 4}, type: :f32)
    assert_same(&shapes/1, [x])
  end

  test "slices with tensor starts" do
    x = Nx.iota({4, 4}, type: :f32)
    assert_same(&dynamic/3, [x, 1, 2])
    assert_same(&dynamic/3, [x, Nx.tensor(3), Nx.tensor(0)])
  end

  test "take, gather, take_along_axis, indexed_add and indexed_put" do
    x = Nx.tensor([[3.0, 1.0, 2.0], [0.5, 9.0, -1.0], [4.0, 4.0, 0.0]])
    assert_same(&indexing/3, [x, Nx.tensor([2, 0, 2]), Nx.tensor([[0, 1], [2, 2], [0, 1]])])
  end

  test "sort, argsort and top_k (Nx's fallback)" do
    x = Nx.tensor([[3.0, 1.0, 2.0, 1.0], [0.5, 9.0, -1.0, 9.0]])
    assert_same(&sorting/1, [x])
  end

  test "conv" do
    input = Nx.iota({1, 2, 5, 6}, type: :f32) |> Nx.divide(10) |> Nx.sin()
    kernel = Nx.iota({3, 2, 2, 2}, type: :f32) |> Nx.divide(5) |> Nx.cos()
    assert_same(&convs/2, [input, kernel])
  end

  test "window ops, window_scatter_max, cumulative ops and window_reduce" do
    x = Nx.tensor([[1.0, 5.0, 2.0, 7.0, 3.0, 0.0], [4.0, 2.0, 8.0, 1.0, 6.0, 9.0]])
    assert_same(&windows/1, [x])
  end

  test "reduce with a function" do
    assert_same(&reducers/1, [Nx.iota({3, 4}, type: :f32)])
  end

  test "cond with captures, multiple clauses and tuples" do
    for x <- [[3.0, 1.0], [1.0, -4.0], [-1.0, 0.5]] do
      assert_same(&conds/2, [Nx.tensor(x), Nx.tensor([0.5, 0.25])])
    end
  end

  test "nested cond" do
    for x <- [[1.0, 2.0], [1.0, -2.0], [-1.0, 2.0]] do
      assert_same(&nested_cond/1, [Nx.tensor(x)])
    end
  end

  test "while, and a cond inside a while" do
    assert_same(&loop/2, [Nx.tensor([1.0, 2.0]), 4])
    assert_same(&single_state_loop/1, [Nx.tensor([1.0, 2.0])])
    assert_same(&loop_with_cond/1, [Nx.tensor([1.0, 2.0])])
  end

  test "value_and_grad of an MLP loss (real Nx's gradient)" do
    key = Nx.Random.key(42)
    {w1, key} = Nx.Random.normal(key, shape: {4, 8})
    {w2, key} = Nx.Random.normal(key, shape: {8, 2})
    {x, key} = Nx.Random.uniform(key, shape: {5, 4})
    {y, _key} = Nx.Random.uniform(key, shape: {5, 2})
    params = %{w1: w1, b1: Nx.broadcast(0.1, {8}), w2: w2, b2: Nx.broadcast(0.0, {2})}
    assert_same(&mlp_grad/3, [params, x, y])
  end

  test "custom_grad and stop_grad give real Nx's gradients" do
    assert assert_same(&grad_custom/1, [Nx.tensor(100.0)]) == Nx.tensor(1.0)

    assert Nx.to_number(Nx.Defn.jit_apply(&grad_plain/1, [Nx.tensor(100.0)], compiler: NxJax)) ==
             :nan

    assert_same(&grad_custom/1, [Nx.tensor(3.0)])
    assert_same(&grad_stop/1, [Nx.tensor(2.0)])
  end

  test "Nx.LinAlg: qr natively, determinant, solve and cholesky by Nx's fallbacks" do
    a = Nx.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    b = Nx.tensor([1.0, 2.0, 3.0])
    assert_same(&linalg/2, [a, b], atol: 1.0e-4)
  end

  test "containers: maps and tuples in and out" do
    args = [%{a: Nx.tensor([1.0, 2.0]), b: {Nx.tensor([3.0, 4.0]), Nx.tensor(5)}}]
    result = assert_same(&containers/1, args)
    assert %{sum: _, pair: {_, _}} = result
  end

  test "iota and eye" do
    assert_same(&iota_eye/1, [Nx.tensor(2.0)])
  end

  test "vectorized arguments" do
    x = Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]) |> Nx.vectorize(:rows)
    y = Nx.tensor([10.0, 20.0]) |> Nx.vectorize(:cols)
    assert_same(fn x, y -> Nx.add(Nx.multiply(Nx.sum(x), y), x) end, [x, y])
    assert_same(fn x -> Nx.dot(x, x) end, [x])
  end

  test "debug_nans: true names the first non-finite value" do
    f = Nx.Defn.jit(&Nx.sum(Nx.log(&1)), compiler: NxJax, debug_nans: true)
    assert f.(Nx.tensor([1.0, 2.0])) == Nx.sum(Nx.log(Nx.tensor([1.0, 2.0])))
    error = assert_raise NxJax.WorkerError, fn -> f.(Nx.tensor([1.0, -2.0])) end
    assert error.class == "NonFinite"
    assert error.message =~ "in the value of log (graph node"
  end

  test "a function is traced once per argument signature" do
    pid = self()

    fun =
      Nx.Defn.jit(
        fn x ->
          send(pid, {:traced, x.type, x.shape})
          Nx.add(x, 1)
        end,
        compiler: NxJax
      )

    assert fun.(Nx.tensor([1.0, 2.0])) == Nx.tensor([2.0, 3.0])
    assert fun.(Nx.tensor([5.0, 6.0])) == Nx.tensor([6.0, 7.0])
    assert fun.(Nx.tensor([1, 2, 3])) == Nx.tensor([2, 3, 4])
    assert fun.(Nx.tensor([7, 8, 9])) == Nx.tensor([8, 9, 10])
    assert_received {:traced, {:f, 32}, {2}}
    # (an integer list is s64 in Nx 0.7, s32 in Nx 0.9)
    integers = Nx.tensor([1, 2, 3]).type
    assert_received {:traced, ^integers, {3}}
    refute_received {:traced, _, _}
  end

  test "Nx.Defn.compile, and a trace reused for the same signature" do
    compiled =
      Nx.Defn.compile(&elementwise/2, [Nx.template({2}, :f32), Nx.template({2}, :f32)],
        compiler: NxJax
      )

    x = Nx.tensor([1.0, -2.0])
    y = Nx.tensor([0.5, 3.0])
    assert_close(compiled.(x, y), Nx.Defn.jit_apply(&elementwise/2, [x, y]))
    assert_close(compiled.(y, x), Nx.Defn.jit_apply(&elementwise/2, [y, x]))
  end

  test "integer and u8 types, constants of every kind" do
    assert_same(&integers/1, [Nx.tensor([1, 2, 3], type: :s64)])
    assert_same(&integers/1, [Nx.tensor([1, 200, 3], type: :u8)])
    assert_same(&non_finite/1, [Nx.tensor([0.0, 1.0])])
  end

  defn hooked(x) do
    y = hook(x * 2, :doubled, fn t -> send(self(), {:doubled, t}) end)
    z = hook({y, x}, :pair)

    {_, w} =
      while {i = 0, w = elem(z, 0)}, i < 2 do
        {i + 1, hook(w + 1, :step, fn t -> send(self(), {:step, t}) end)}
      end

    w
  end

  test "hooks: their functions, overridden by name, and inside a while" do
    x = Nx.tensor([1.0, 2.0])
    pid = self()
    hooks = %{pair: fn {a, b} -> send(pid, {:pair, a, b}) end}
    result = Nx.Defn.jit_apply(&hooked/1, [x], compiler: NxJax, hooks: hooks)
    assert result == Nx.tensor([4.0, 6.0])
    assert_received {:doubled, doubled}
    assert doubled == Nx.tensor([2.0, 4.0])
    assert_received {:pair, ^doubled, ^x}
    assert_received {:step, step}
    assert step == Nx.tensor([3.0, 5.0])
    assert_received {:step, ^result}
  end

  defn running_sum(input, acc, scale), do: {input * scale + acc, acc + input}

  test "Nx.Defn.stream: a step per input, the accumulator carried" do
    stream =
      Nx.Defn.stream(&running_sum/3, [Nx.template({2}, :f32), Nx.tensor([0.0, 0.0]), 10.0],
        compiler: NxJax
      )

    for input <- [[1.0, 2.0], [3.0, 4.0]], do: Nx.Stream.send(stream, Nx.tensor(input))
    assert Nx.Stream.recv(stream) == Nx.tensor([10.0, 20.0])
    assert Nx.Stream.recv(stream) == Nx.tensor([31.0, 42.0])
    assert Nx.Stream.done(stream) == Nx.tensor([4.0, 6.0])
  end

  defn stream_pairs(i, {a, b}), do: {{a * i, {}}, {a + i, b - i}}

  test "Nx.Defn.stream: outputs shaped unlike the accumulator, and its end" do
    stream = Nx.Defn.stream(&stream_pairs/2, [0, {1, 10}], compiler: NxJax)
    Nx.Stream.send(stream, 2)
    assert Nx.Stream.recv(stream) == {Nx.tensor(2), {}}
    Nx.Stream.send(stream, 3)

    assert_raise RuntimeError, ~r/recv messages pending/, fn -> Nx.Stream.done(stream) end
    assert Nx.Stream.recv(stream) == {Nx.tensor(9), {}}
    assert Nx.Stream.done(stream) == {Nx.tensor(6), Nx.tensor(5)}

    assert_raise RuntimeError, ~r/terminated/, fn -> Nx.Stream.recv(stream) end
  end
end
