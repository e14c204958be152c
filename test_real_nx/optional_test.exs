defmodule NxJax.RealNx.OptionalTest do
  # Real Nx's optional nodes: EXLA 0.7.2 lowers qr (real types), top_k, fft2 and ifft2
  # natively, and so does NxJax (one wire node each); every other optional op runs Nx's own
  # fallback expression. Values, and gradients where Nx defines them, against real Nx's
  # evaluator.
  use ExUnit.Case, async: true

  import NxJax.RealNxCase
  import Nx.Defn

  defn top(x), do: {Nx.top_k(x, k: 3), Nx.top_k(x, k: 1)}
  defn top_grad(x), do: grad(x, fn x -> Nx.sum(elem(Nx.top_k(x, k: 2), 0) ** 2) end)

  defn fourier(x) do
    {Nx.fft2(x), Nx.ifft2(x), Nx.fft2(x, lengths: [4, 2]),
     Nx.fft2(x, axes: [2, 1], lengths: [3, :power_of_two])}
  end

  # (over the last two axes, at their own lengths: real Nx 0.7.2's gradient of fft fails
  # otherwise)
  defn fourier_grad(x) do
    grad(x, fn x ->
      z = Nx.fft2(x) + Nx.ifft2(x) * 4
      Nx.sum(Nx.real(z) * Nx.imag(z)) + Nx.sum(Nx.abs(z))
    end)
  end

  defp graph_ops(fun, args) do
    {graph, _parameters, _hooks} = NxJax.WireEncoder.encode(Nx.Defn.debug_expr_apply(fun, args))
    NxJax.Ops.check_graph!(graph)
    {:nx_jax_graph, 1, nodes, _outputs} = graph
    for {_, op, _, _, _} <- nodes, do: op
  end

  test "top_k: Nx's order (ties by index, NaN first, -0.0 and 0.0 equal), batched" do
    x =
      Nx.tensor([
        [1.0, 3.0, 3.0, :nan, 2.0, :infinity, :neg_infinity, 3.0],
        [-0.0, 0.0, -0.0, -1.0, 5.0, 5.0, :nan, :nan]
      ])

    {{values, indices}, _} = ours = assert_same(&top/1, [x])
    {{nx_values, _}, _} = Nx.Defn.jit_apply(&top/1, [x], compiler: Nx.Defn.Evaluator)
    # the bits too: -0.0 where Nx has -0.0
    assert Nx.to_binary(values) == Nx.to_binary(nx_values)
    assert indices == Nx.tensor([[3, 5, 1], [6, 7, 4]])
    assert_same(&top/1, [Nx.tensor([[2, 2, 1, 2, 0], [0, 5, 5, -1, 5]], type: :s32)])
    assert_same(&top/1, [Nx.iota({2, 3, 4}, type: :f64) |> Nx.reverse(axes: [2])])
    assert {_, _} = ours
  end

  test "top_k, fft2 and ifft2 of vectorized tensors" do
    x = Nx.tensor([[1.0, 4.0, 2.0, 4.0], [0.5, -1.0, 3.0, 2.0]]) |> Nx.vectorize(:rows)
    assert_same(&top/1, [x])
    y = Nx.iota({2, 2, 3, 4}, type: :f32) |> Nx.cos() |> Nx.vectorize(:batch)
    assert_same(&fourier/1, [y], atol: 1.0e-5)
  end

  test "the gradient through top_k reaches the chosen entries only" do
    x = Nx.tensor([[0.5, 3.0, -1.0, 2.0, 2.0], [1.0, 0.0, 4.0, -2.0, 1.5]])
    grads = assert_same(&top_grad/1, [x])
    assert grads == Nx.tensor([[0.0, 6.0, 0.0, 4.0, 0.0], [0.0, 0.0, 8.0, 0.0, 3.0]])
  end

  test "fft2 and ifft2 over any two axes, with lengths that pad and truncate" do
    x = Nx.iota({2, 3, 4}, type: :f32) |> Nx.multiply(0.25) |> Nx.sin()
    assert_same(&fourier/1, [x], atol: 1.0e-5)
    assert_same(&fourier/1, [Nx.as_type(x, :f64)], atol: 1.0e-12)
    z = Nx.complex(x, Nx.cos(x))
    assert_same(&fourier/1, [z], atol: 1.0e-5)
  end

  # Real Nx 0.7.2's fallback (a transform along axis 2, then along axis 0) does not give
  # numpy.fft.ifft2(x, axes: (0, 2)) here; EXLA's native lowering and ours do: the reference
  # is the transform over the last two axes of the transposed tensor, where all agree
  test "fft2 and ifft2 over axes that are not adjacent" do
    x = Nx.iota({2, 3, 4}, type: :f64) |> Nx.multiply(0.25) |> Nx.sin()
    t = Nx.transpose(x, axes: [1, 0, 2])

    for fun <- [&Nx.fft2/2, &Nx.ifft2/2] do
      ours = Nx.Defn.jit_apply(&fun.(&1, axes: [0, 2]), [x], compiler: NxJax)
      want = Nx.transpose(fun.(t, []), axes: [1, 0, 2])
      assert_close(ours, want, atol: 1.0e-12)
    end
  end

  test "the gradient through fft2 and ifft2" do
    x = Nx.iota({2, 3, 4}, type: :f64) |> Nx.multiply(0.3) |> Nx.cos()
    assert_same(&fourier_grad/1, [x], atol: 1.0e-10)
  end

  test "the graph sent holds top_k, fft2 and ifft2 nodes, not their fallbacks' expansions" do
    x = Nx.iota({3, 4}, type: :f32)
    ops = graph_ops(&Nx.top_k(&1, k: 2), [x])
    assert :top_k in ops
    refute :argsort in ops
    refute :take_along_axis in ops

    assert :fft2 in graph_ops(&Nx.fft2/1, [x])
    assert :ifft2 in graph_ops(&Nx.ifft2(&1, lengths: [2, 8]), [x])

    for fun <- [&Nx.fft2/1, &Nx.ifft2/1] do
      ops = graph_ops(fun, [x])
      refute :fft in ops
      refute :ifft in ops
      refute :transpose in ops
    end
  end

  test "exactly EXLA's native set is native: qr of real matrices; the rest are Nx's fallbacks" do
    a = Nx.tensor([[4.0, 1.0], [1.0, 3.0]])
    b = Nx.tensor([1.0, 2.0])
    assert :qr in graph_ops(&Nx.LinAlg.qr/1, [a])
    # complex qr: EXLA takes Nx's fallback
    refute :qr in graph_ops(&Nx.LinAlg.qr/1, [Nx.complex(a, a)])

    for {fun, args, native} <- [
          {&Nx.LinAlg.cholesky/1, [a], :cholesky},
          {&Nx.LinAlg.determinant/1, [a], :determinant},
          {&Nx.LinAlg.solve/2, [a, b], :solve},
          {&Nx.LinAlg.svd/1, [a], :svd},
          {&Nx.LinAlg.eigh/1, [a], :eigh}
        ] do
      ops = graph_ops(fun, args)
      refute native in ops, "#{native} was lowered natively: #{inspect(ops)}"
      assert length(ops) > 3
    end
  end
end
