defmodule NxJax.SeamCompilerTest do
  # The front end through a second compiler, NxJax.Test.SeamCompiler (test_elixir/support),
  # which evaluates graphs in Elixir: the same defn programs give the values NxJax's worker
  # gives and those worked out by hand, and no request reaches the worker while they run.
  # async: false: the worker counters read here are the pool's, shared with other tests.
  use ExUnit.Case, async: false

  alias NxJax.Test.{SeamCompiler, SeamRun}

  defmodule Programs do
    import Nx.Defn

    defn affine_exp(x, y), do: Nx.exp(x * 2 - y) / (1 + Nx.cos(y))

    defn containers({a, b}, %{w: w}) do
      %{
        total: Nx.sum(a * w),
        rows: Nx.sum(Nx.dot(a, b), axes: [1]),
        pair: {-b, Nx.transpose(a) + 0.5}
      }
    end

    defn log_norm(x), do: Nx.log(Nx.sum(squared(x)))
    defnp squared(x), do: x * x

    defn shapes(x) do
      filled = Nx.broadcast(3.0, {2, 3})
      {Nx.reshape(x, {3, 2}), filled * Nx.sin(x), Nx.mean(x, axes: [0])}
    end

    defn integers(a, b), do: Nx.sum(a * b - 3, axes: [0], keep_axes: true)

    defn stopped(x), do: stop_grad(x * x) + x
    defn running_sum(x, acc), do: {acc, acc + x}
    defn grad_of_square(x), do: grad(x, &Nx.sum(&1 * &1))
  end

  # requests the pool's workers have seen (calls through the server, borrowed calls, runs in
  # Python), read outside the window they measure
  defp worker_requests do
    stats = NxJax.Pool.stats()
    Map.take(stats, [:runs, :graph_sends, :key_calls, :lent_calls])
  end

  # runs `fun` and asserts that no worker request was made meanwhile
  defp without_worker(fun) do
    before = worker_requests()
    result = fun.()
    assert worker_requests() == before
    result
  end

  defp seam, do: [compiler: SeamCompiler]

  # same type, shape and names; values within `tol` of each other (relative to their size)
  defp assert_close(%Nx.Tensor{} = got, %Nx.Tensor{} = want, tol \\ 1.0e-6) do
    assert {got.type, got.shape, got.names} == {want.type, want.shape, want.names}
    assert %Nx.BinaryBackend{} = got.data

    for {g, w} <- Enum.zip(Nx.to_flat_list(got), Nx.to_flat_list(want)) do
      assert abs(g - w) <= tol * max(1.0, abs(w)), "got #{g}, want #{w}"
    end
  end

  defp assert_all_close(got, want, tol \\ 1.0e-6) do
    got_leaves = Nx.Defn.Composite.flatten_list([got])
    want_leaves = Nx.Defn.Composite.flatten_list([want])
    assert Nx.Defn.Composite.compatible?(got, want, fn _, _ -> true end)
    assert length(got_leaves) == length(want_leaves)
    Enum.zip_with(got_leaves, want_leaves, &assert_close(&1, &2, tol))
  end

  test "the seam compiler's code calls no module of nx_jax, only Nx's" do
    {:ok, {_module, [imports: imports]}} = :beam_lib.chunks(:code.which(SeamCompiler), [:imports])

    called = imports |> Enum.map(&elem(&1, 0)) |> Enum.uniq()
    assert Nx.BinaryBackend in called and Nx.Defn.Composite in called
    assert Enum.filter(called, &String.starts_with?(Atom.to_string(&1), "Elixir.NxJax")) == []
  end

  test "the worker counters read here see a call of the default compiler" do
    x = Nx.tensor([0.0, 0.5, 1.0])

    assert_raise ExUnit.AssertionError, fn ->
      without_worker(fn -> Programs.affine_exp(x, Nx.tensor([3.0, 1.0, 2.0])) end)
    end
  end

  test "a defn of several element-wise ops: the worker's values and the hand-computed ones" do
    x = Nx.tensor([0.0, 0.5, 1.0])
    y = Nx.tensor([1.0, 0.0, 2.0])
    on_worker = Programs.affine_exp(x, y)

    got = without_worker(fn -> Nx.Defn.jit_apply(&Programs.affine_exp/2, [x, y], seam()) end)

    assert_all_close(got, on_worker)

    by_hand =
      Enum.zip_with([0.0, 0.5, 1.0], [1.0, 0.0, 2.0], fn a, b ->
        :math.exp(a * 2 - b) / (1 + :math.cos(b))
      end)

    assert_close(got, Nx.tensor(by_hand))
  end

  test "containers in and out (tuples, maps, nested), with dot, transpose and sums" do
    a = Nx.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = Nx.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -2.0]])
    w = Nx.tensor([[2.0, 0.0], [1.0, -1.0]])
    on_worker = Programs.containers({a, b}, %{w: w})

    got = without_worker(fn -> Nx.Defn.jit(&Programs.containers/2, seam()).({a, b}, %{w: w}) end)

    assert_all_close(got, on_worker)
    # a * w = [[2, 0], [3, -4]]: 1; a . b = [[3.5, -1, -2], [7.5, -3, -2]]: row sums 0.5, 2.5
    assert got.total == Nx.tensor(1.0)
    assert got.rows == Nx.tensor([0.5, 2.5])

    assert got.pair ==
             {Nx.tensor([[-0.5, 1.0, -2.0], [-1.5, -0.0, 2.0]]),
              Nx.tensor([[1.5, 3.5], [2.5, 4.5]])}
  end

  test "a defn calling a defnp, jitted, compiled ahead, and called with compiler: in the defaults" do
    x = Nx.tensor([1.0, 2.0, 2.0])
    on_worker = Programs.log_norm(x)

    got =
      without_worker(fn ->
        compiled = Nx.Defn.compile(&Programs.log_norm/1, [Nx.template({3}, :f32)], seam())
        first = compiled.(x)
        second = compiled.(Nx.tensor([3.0, 4.0, 0.0]))

        previous = Nx.Defn.default_options(seam())

        from_defaults =
          try do
            Programs.log_norm(x)
          after
            Nx.Defn.default_options(previous)
          end

        {first, second, from_defaults}
      end)

    {first, second, from_defaults} = got
    assert_close(first, on_worker)
    # log(1 + 4 + 4) and log(9 + 16)
    assert_close(first, Nx.tensor(:math.log(9.0)))
    assert_close(second, Nx.tensor(:math.log(25.0)))
    assert from_defaults == first
  end

  test "reshape, a broadcast scalar, mean; integers; f64; stop_grad's identity" do
    x = Nx.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    a = Nx.tensor([[1, 2], [3, 4]])
    b = Nx.tensor([[5, 6], [7, 8]])
    d = Nx.tensor([1.0, 2.0], type: :f64)
    on_worker = {Programs.shapes(x), Programs.integers(a, b), Programs.stopped(d)}

    {shapes, integers, stopped} =
      without_worker(fn ->
        {Nx.Defn.jit_apply(&Programs.shapes/1, [x], seam()),
         Nx.Defn.jit_apply(&Programs.integers/2, [a, b], seam()),
         Nx.Defn.jit_apply(&Programs.stopped/1, [d], seam())}
      end)

    assert_all_close({shapes, integers, stopped}, on_worker)
    {reshaped, filled, mean} = shapes
    assert reshaped == Nx.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])

    assert_close(
      filled,
      Nx.tensor(for row <- [[0, 1, 2], [3, 4, 5]], do: Enum.map(row, &(3 * :math.sin(&1))))
    )

    assert mean == Nx.tensor([1.5, 2.5, 3.5])
    # a * b - 3 = [[2, 9], [18, 29]], summed over axis 0, kept
    assert integers == Nx.tensor([[20, 38]])
    assert stopped == Nx.tensor([2.0, 6.0], type: :f64)
  end

  test "a stream steps through the seam compiler" do
    stream =
      without_worker(fn ->
        stream = Nx.Defn.stream(&Programs.running_sum/2, [Nx.template({}, :s64), 0], seam())
        Nx.Stream.send(stream, 5)
        assert Nx.Stream.recv(stream) == Nx.tensor(0)
        Nx.Stream.send(stream, 7)
        assert Nx.Stream.recv(stream) == Nx.tensor(5)
        stream
      end)

    assert Nx.Stream.done(stream) == Nx.tensor(12)
  end

  # (the check of `make test-seam`, which runs tagged tests of the suite with the seam
  # compiler the default one)
  test "the seam run's check, NxJax.Test.SeamRun.checked/1, sees a call into the runtime" do
    x = Nx.tensor([1.0, 2.0, 2.0])

    assert_raise RuntimeError, ~r/called nx_jax's runtime, .*NxJax.__run__\/5/, fn ->
      SeamRun.checked(fn -> Nx.exp(x) end)
    end

    # from a process it starts too, and a defn on the default compiler
    assert_raise RuntimeError, ~r/called nx_jax's runtime, .*NxJax.Pool/, fn ->
      SeamRun.checked(fn -> Task.await(Task.async(fn -> Programs.log_norm(x) end)) end)
    end

    # none where the seam compiler runs, and the check is over when it returns
    got = SeamRun.checked(fn -> Nx.Defn.jit_apply(&Programs.log_norm/1, [x], seam()) end)
    assert_close(got, Nx.tensor(:math.log(9.0)))
    assert Nx.exp(Nx.tensor(0.0)) == Nx.tensor(1.0)
    assert {:flags, []} = :erlang.trace_info(self(), :flags)
  end

  test "grad, an op outside its set and a resident argument are clear errors" do
    assert_raise ArgumentError, ~r/cannot run grad: .*differentiated by the JAX worker/, fn ->
      Nx.Defn.jit_apply(&Programs.grad_of_square/1, [Nx.tensor([1.0])], seam())
    end

    assert_raise ArgumentError, ~r/does not implement the op :erf/, fn ->
      Nx.Defn.jit_apply(&Nx.erf/1, [Nx.tensor(1.0)], seam())
    end

    assert_raise ArgumentError, ~r/computes on finite numbers only: :log/, fn ->
      Nx.Defn.jit_apply(&Nx.log/1, [Nx.tensor(0.0)], seam())
    end

    resident = Nx.backend_transfer(Nx.tensor([1.0, 2.0]), NxJax.Backend)

    assert_raise ArgumentError, ~r/reads arguments of Nx.BinaryBackend only.*NxJax.Backend/, fn ->
      Nx.Defn.jit_apply(&Nx.exp/1, [resident], seam())
    end
  end
end
