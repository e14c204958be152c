defmodule NxJax.CheckpointTest do
  # checkpoint/3 and checkpoint_name/2: a tanh MLP whose gradients with every policy equal
  # the plain ones, grad of grad, inside a while over a range, with cond and stop_grad, and
  # the errors raised at trace time.
  use ExUnit.Case, async: true

  import Nx.Defn
  import NxJax.Autodiff.Checkpoint

  doctest NxJax.Autodiff.Checkpoint

  @policies [
    nil,
    :everything_saveable,
    :nothing_saveable,
    :dots_saveable,
    :dots_with_no_batch_dims_saveable,
    {:save_only, [:h]},
    {:save_anything_except, ["h"]}
  ]

  defn layer(x, w), do: Nx.tanh(Nx.dot(x, w))

  # three tanh layers, the middle one named :h
  defn plain_mlp(x, w1, w2, w3) do
    x |> layer(w1) |> layer(w2) |> layer(w3) |> Nx.sum()
  end

  defn checkpointed_mlp(x, w1, w2, w3, opts \\ []) do
    h = checkpoint(fn {x, w1} -> x |> layer(w1) |> checkpoint_name(:h) end, {x, w1}, opts)
    # a list of arguments, and w3 captured
    y = checkpoint(fn h, w2 -> h |> layer(w2) |> layer(w3) end, [h, w2], opts)
    Nx.sum(y)
  end

  defn tuple_result(x, w) do
    {a, b} = checkpoint(fn x -> {Nx.sin(x) * w, Nx.cos(x)} end, x, policy: :nothing_saveable)
    Nx.sum(a * b)
  end

  # 4 layers of one weight in a while over a range, the body checkpointed (a lax.scan)
  defn looped(x, w) do
    {x, _w} =
      while {x, w}, _i <- 0..3 do
        {checkpoint(&layer/2, [x, w], policy: :nothing_saveable, prevent_cse: false), w}
      end

    Nx.sum(x)
  end

  defn looped_plain(x, w) do
    {x, _w} = while({x, w}, _i <- 0..3, do: {layer(x, w), w})
    Nx.sum(x)
  end

  defn branchy(x, w) do
    if Nx.sum(x) > 0 do
      Nx.sum(checkpoint(&layer/2, [x, w], policy: :dots_saveable))
    else
      Nx.sum(Nx.dot(x, w) * 2)
    end
  end

  # v a vector: only x * v is differentiated
  defn stopped(x, v),
    do: Nx.sum(checkpoint(fn x -> stop_grad(Nx.tanh(x * v)) + x * v end, x))

  defp inputs do
    key = Nx.Random.key(7)
    {x, key} = Nx.Random.normal(key, shape: {4, 3}, type: :f64)
    {w1, key} = Nx.Random.normal(key, shape: {3, 3}, type: :f64)
    {w2, key} = Nx.Random.normal(key, shape: {3, 3}, type: :f64)
    {w3, _key} = Nx.Random.normal(key, shape: {3, 3}, type: :f64)
    {x, w1, w2, w3}
  end

  defp assert_all_close(got, want, tol) do
    diff = Nx.subtract(got, want) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    assert diff <= tol, "max difference #{diff}:\n#{inspect(got)}\n#{inspect(want)}"
  end

  test "with every policy the values and gradients are those of the plain MLP" do
    {x, w1, w2, w3} = inputs()
    want = value_and_grad({w1, w2, w3}, fn {a, b, c} -> plain_mlp(x, a, b, c) end)
    {want_value, {want1, want2, want3}} = want
    assert Nx.to_number(want_value) != 0.0

    for policy <- @policies, prevent_cse <- [true, false] do
      opts = [policy: policy, prevent_cse: prevent_cse]

      {value, {g1, g2, g3}} =
        value_and_grad({w1, w2, w3}, fn {a, b, c} -> checkpointed_mlp(x, a, b, c, opts) end)

      assert_in_delta Nx.to_number(value), Nx.to_number(want_value), 1.0e-12
      assert_all_close(g1, want1, 1.0e-6)
      assert_all_close(g2, want2, 1.0e-6)
      assert_all_close(g3, want3, 1.0e-6)
    end
  end

  test "f32 gradients and the gradient with respect to the input" do
    {x, w1, w2, w3} = inputs()
    [x, w1, w2, w3] = Enum.map([x, w1, w2, w3], &Nx.as_type(&1, :f32))
    got = grad(x, fn x -> checkpointed_mlp(x, w1, w2, w3, policy: :nothing_saveable) end)
    assert got.type == {:f, 32}
    assert_all_close(got, grad(x, fn x -> plain_mlp(x, w1, w2, w3) end), 1.0e-6)
  end

  test "a tuple result, and grad of grad" do
    x = Nx.tensor([0.3, -1.2, 2.0], type: :f64)
    w = Nx.tensor(1.5, type: :f64)
    # sum(sin x cos x w) = sum(sin(2x)) w / 2: d/dx = cos(2x) w, d2/dx dw = cos(2x)
    assert_all_close(
      grad(x, &tuple_result(&1, w)),
      Nx.multiply(Nx.cos(Nx.multiply(2, x)), w),
      1.0e-12
    )

    second = grad(w, fn w -> Nx.sum(grad(x, &tuple_result(&1, w))) end)
    assert_in_delta Nx.to_number(second), Nx.to_number(Nx.sum(Nx.cos(Nx.multiply(2, x)))), 1.0e-12

    # d2/dx2 of sum(sin(2x)) w / 2 = -2 sin(2x) w (through the checkpoint twice)
    hessian_diag = grad(x, fn x -> Nx.sum(grad(x, &tuple_result(&1, w))) end)
    want = Nx.multiply(Nx.multiply(-2, Nx.sin(Nx.multiply(2, x))), w)
    assert_all_close(hessian_diag, want, 1.0e-12)
  end

  test "inside a while over a range, with cond and with stop_grad" do
    {x, w, _, _} = inputs()
    assert_all_close(looped(x, w), looped_plain(x, w), 1.0e-12)
    assert_all_close(grad(w, &looped(x, &1)), grad(w, &looped_plain(x, &1)), 1.0e-6)

    plain_layer = fn x, w -> Nx.sum(Nx.tanh(Nx.dot(x, w))) end
    positive = Nx.abs(x)

    assert_all_close(
      grad(w, &branchy(positive, &1)),
      grad(w, &plain_layer.(positive, &1)),
      1.0e-6
    )

    negative = Nx.negate(positive)
    other_branch = fn w -> Nx.sum(Nx.multiply(Nx.dot(negative, w), 2)) end
    assert_all_close(grad(w, &branchy(negative, &1)), grad(w, other_branch), 1.0e-12)

    # the stopped term gives nothing: d/dv sum(x * v) = the sums of x's columns
    v = Nx.tensor([0.5, -0.25, 2.0], type: :f64)
    assert_all_close(grad(v, &stopped(x, &1)), Nx.sum(x, axes: [0]), 1.0e-12)
  end

  # log1p(exp(x)) with its stable gradient, checkpointed: plain autodiff gives NaN at 100
  defn stable_softplus(x) do
    checkpoint(
      fn x ->
        custom_grad(Nx.log1p(Nx.exp(x)), [x], fn g -> [g * Nx.sigmoid(x)] end)
      end,
      x,
      policy: :nothing_saveable
    )
  end

  test "a custom_grad inside a checkpointed function is the gradient used, recomputed or not" do
    x = Nx.tensor([0.0, 2.0, 100.0])
    assert_all_close(grad(x, &Nx.sum(stable_softplus(&1))), Nx.sigmoid(x), 1.0e-7)
    assert Nx.to_number(grad(Nx.tensor(100.0), &stable_softplus/1)) == 1.0
  end

  test "a hook inside a checkpointed function fires once, gradients or not" do
    me = self()
    hooked = fn x -> Nx.Defn.Kernel.hook(Nx.sin(x), &send(me, {:hooked, &1})) end
    f = fn x -> Nx.sum(checkpoint(hooked, x, policy: :nothing_saveable)) end
    x = Nx.tensor([1.0, 2.0])
    assert grad(x, f) == Nx.cos(x)
    assert_received {:hooked, value}
    assert value == Nx.sin(x)
    refute_received {:hooked, _}
  end

  test "checkpoint_name is the identity for values and gradients, outside checkpoint too" do
    x = Nx.tensor([1.0, 2.0, 3.0])
    f = fn x -> Nx.sum(Nx.exp(checkpoint_name(x, "e"))) end
    assert grad(x, f) == Nx.exp(x)
    assert Nx.Defn.jit(&checkpoint_name(&1, :x)).(x) == x
  end

  # x vectorized along :rows (one input of the MLP per entry), w3 captured
  defn vectorized_loss(x, w1, w2, w3, opts \\ []) do
    x |> checkpointed_mlp_rows(w1, w2, w3, opts) |> Nx.devectorize() |> Nx.sum()
  end

  defn vectorized_plain_loss(x, w1, w2, w3) do
    x |> layer(w1) |> layer(w2) |> layer(w3) |> Nx.sum() |> Nx.devectorize() |> Nx.sum()
  end

  defnp checkpointed_mlp_rows(x, w1, w2, w3, opts) do
    h = checkpoint(fn {x, w1} -> x |> layer(w1) |> checkpoint_name(:h) end, {x, w1}, opts)
    h |> layer(w2) |> then(&checkpoint(fn h -> layer(h, w3) end, &1, opts)) |> Nx.sum()
  end

  test "vectorized values are checkpointed whole: the same values and gradients as without" do
    {x, w1, w2, w3} = inputs()
    rows = Nx.vectorize(x, :rows)

    # values, entry by entry, with the vectorized axes the function gives them
    sines = Nx.Defn.jit(fn x -> checkpoint(&Nx.sin/1, x) end).(rows)
    assert sines.vectorized_axes == rows.vectorized_axes
    assert_all_close(Nx.devectorize(sines), Nx.sin(x), 0.0)

    # a captured value vectorized along another axis: the result has both, as Nx.add gives
    v = Nx.vectorize(Nx.tensor([1.0, 2.0, 3.0]), :c)
    sums = Nx.Defn.jit(fn x, v -> checkpoint(fn x -> Nx.add(x, v) end, x) end).(rows, v)
    assert sums == Nx.add(rows, v)
    assert sums.vectorized_axes == [rows: elem(x.shape, 0), c: 3]

    # gradients with respect to the shared weights and to the vectorized inputs
    want_w = grad({w1, w2, w3}, fn {a, b, c} -> vectorized_plain_loss(rows, a, b, c) end)
    want_x = grad(rows, &vectorized_plain_loss(&1, w1, w2, w3))

    for policy <- @policies do
      got_w =
        grad({w1, w2, w3}, fn {a, b, c} -> vectorized_loss(rows, a, b, c, policy: policy) end)

      Enum.zip_with(
        Tuple.to_list(got_w),
        Tuple.to_list(want_w),
        &assert_all_close(&1, &2, 1.0e-12)
      )

      got_x = grad(rows, &vectorized_loss(&1, w1, w2, w3, policy: policy))
      assert got_x.vectorized_axes == rows.vectorized_axes
      assert_all_close(Nx.devectorize(got_x), Nx.devectorize(want_x), 1.0e-12)
    end
  end

  test "bad policies, options and names are refused when traced" do
    {x, w, _, _} = inputs()

    assert_raise ArgumentError,
                 ~r/expects :policy to be nil, one of :everything_saveable, :nothing_saveable, :dots_saveable, :dots_with_no_batch_dims_saveable, \{:save_only, names\}/,
                 fn ->
                   Nx.Defn.jit(&checkpoint(fn x -> layer(x, w) end, &1, policy: :offload_all)).(x)
                 end

    assert_raise ArgumentError, ~r/expects :policy to be nil/, fn ->
      Nx.Defn.jit(&checkpoint(fn x -> x end, &1, policy: {:save_only, :h})).(x)
    end

    assert_raise ArgumentError,
                 ~r/expects a name to be an atom or a non-empty string, got: 1/,
                 fn ->
                   Nx.Defn.jit(&checkpoint(fn x -> x end, &1, policy: {:save_only, [1]})).(x)
                 end

    assert_raise ArgumentError, ~r/:prevent_cse to be a boolean, got: :yes/, fn ->
      Nx.Defn.jit(&checkpoint(fn x -> x end, &1, prevent_cse: :yes)).(x)
    end

    assert_raise ArgumentError, ~r/unknown keys? \[:polcy\]/, fn ->
      Nx.Defn.jit(&checkpoint(fn x -> x end, &1, polcy: :nothing_saveable)).(x)
    end

    assert_raise ArgumentError, ~r/checkpoint_name\/2 expects a name/, fn ->
      Nx.Defn.jit(&checkpoint_name(&1, "")).(x)
    end

    assert_raise ArgumentError, ~r/a function of 2 arguments for the list of 2/, fn ->
      Nx.Defn.jit(&checkpoint(fn x -> x end, [&1, w])).(x)
    end

    assert_raise ArgumentError, ~r/must return a tensor, a number or a container/, fn ->
      Nx.Defn.jit(&checkpoint(fn _x -> {} end, &1)).(x)
    end

    # the worker serves on
    assert_all_close(looped(x, w), looped_plain(x, w), 1.0e-12)
  end
end
