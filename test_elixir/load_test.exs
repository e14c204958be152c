defmodule NxJax.LoadTest do
  # 50 processes x 200 calls, random ops and shapes, through a two-worker pool. Every result is
  # checked against the same arithmetic done on Elixir lists, and every call's input carries
  # its caller and call number, so a reply delivered to the wrong caller cannot pass.
  # No timing assertions: latency is measured by bench/run.exs (docs/BENCHMARKS.md).
  use ExUnit.Case, async: false

  @moduletag timeout: NxJax.TestTime.ms(600_000)

  @processes 50
  @calls 200
  @shapes [{}, {3}, {2, 3}, {4, 2}]
  @types [{:s, 32}, {:f, 64}]
  @binary [:add, :subtract, :multiply, :max, :min]
  @unary [:negate, :abs, :sum]

  setup_all do
    NxJax.TestPool.replace_application_pool(2)
  end

  # a random call: {op, type, shape, inputs as flat lists}; the first element of the first
  # input is a tag unique to (caller, call)
  defp random_call(caller, call) do
    op = Enum.random(@binary ++ @unary)
    type = Enum.random(@types)
    shape = Enum.random(@shapes)
    size = shape |> Tuple.to_list() |> Enum.product()
    tag = caller * 1000 + call
    arity = if op in @binary, do: 2, else: 1

    inputs =
      for i <- 1..arity do
        values = for _ <- 1..size, do: Enum.random(-999..999)
        values = if i == 1, do: [tag | tl(values)], else: values
        Enum.map(values, &cast(&1, type))
      end

    {op, type, shape, inputs}
  end

  defp cast(v, {:f, 64}), do: v * 1.0
  defp cast(v, {:s, 32}), do: v

  defp expected(:add, [a, b]), do: Enum.zip_with(a, b, &+/2)
  defp expected(:subtract, [a, b]), do: Enum.zip_with(a, b, &-/2)
  defp expected(:multiply, [a, b]), do: Enum.zip_with(a, b, &*/2)
  defp expected(:max, [a, b]), do: Enum.zip_with(a, b, &max/2)
  defp expected(:min, [a, b]), do: Enum.zip_with(a, b, &min/2)
  defp expected(:negate, [a]), do: Enum.map(a, &(-&1))
  defp expected(:abs, [a]), do: Enum.map(a, &abs/1)
  defp expected(:sum, [a]), do: [Enum.sum(a)]

  # Nx sums integers in 64 bits
  defp out_type(:sum, {:s, 32}), do: {:s, 64}
  defp out_type(_op, type), do: type

  defp run({op, type, shape, inputs}) do
    tensors = Enum.map(inputs, &(Nx.tensor(&1, type: type) |> Nx.reshape(shape)))
    apply(Nx, op, tensors)
  end

  test "50 processes x 200 random calls through the pool: every result is correct" do
    before = Enum.map(NxJax.Pool.workers(), &NxJax.Worker.stats(server: &1).runs)

    failures =
      1..@processes
      |> Enum.map(fn caller ->
        Task.async(fn ->
          for call <- 1..@calls,
              spec = random_call(caller, call),
              result = run(spec),
              {op, type, _shape, inputs} = spec,
              want = expected(op, inputs),
              result.type != out_type(op, type) or Nx.to_flat_list(result) != want,
              do: {caller, call, spec, Nx.to_flat_list(result)}
        end)
      end)
      |> Enum.flat_map(&Task.await(&1, :infinity))

    assert failures == []

    runs =
      Enum.zip_with(
        Enum.map(NxJax.Pool.workers(), &NxJax.Worker.stats(server: &1).runs),
        before,
        &-/2
      )

    # each call is one run, plus the eager reshapes that built its inputs
    assert Enum.sum(runs) >= @processes * @calls
    assert Enum.all?(runs, &(&1 > 0)), "both workers serve: #{inspect(runs)}"
  end
end
