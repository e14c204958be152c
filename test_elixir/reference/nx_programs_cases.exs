# Cases of what real programs written for Nx 0.7.2 do beyond Nx's own test files: real Nx
# 0.7.2's answers are in nx_0.7.2_programs.tsv (written by nx_programs_reference.exs); ours are
# compared with them by the test named in each group. Written against Nx 0.7.2's public API
# only; required by both sides.
defmodule NxProgramsCases do
  import Nx.Defn

  defn add2(a, b), do: a + b
  # (thirds, whose f64 and f32 values differ; not exp: XLA's f64 exp differs from the C
  # library's, which Nx uses, in the last bit for some inputs, see docs/COMPATIBILITY.md)
  defn map_divide_f64(t), do: Nx.map(t, [type: {:f, 64}], &Nx.divide(&1, 3))
  defn map_add(t), do: Nx.map(t, &Nx.add(&1, 1))
  defn times_tenth(t), do: t * 0.1
  defn tenth_minus(t), do: 0.3 - t
  defn pow_tenth(t), do: Nx.pow(t, 0.1)

  def cases do
    inputs() ++
      functions() ++ vectorized() ++ half_floats() ++ float_numbers() ++ decompositions()
  end

  # shapes given as numbers, values that are not tensors where a tensor is expected
  # (test_elixir/nx_creation_test.exs)
  def inputs do
    [
      {"broadcast_number_shape", fn -> Nx.broadcast(0, 12) end},
      {"broadcast_float_number_shape", fn -> Nx.broadcast(1.5, 3) end},
      {"broadcast_tensor_number_shape", fn -> Nx.broadcast(Nx.tensor([1, 2]), 5) end},
      {"reshape_number_shape", fn -> Nx.reshape(Nx.tensor([7]), 5) end},
      {"iota_number_shape", fn -> Nx.iota(5) end},
      {"broadcast_list_shape", fn -> Nx.broadcast(0, [2]) end},
      {"add_list", fn -> Nx.add([1, 2], 1) end},
      {"add_tensor_list", fn -> Nx.add(Nx.tensor(1), [1, 2]) end},
      {"add_string", fn -> Nx.add("abc", 1) end},
      {"add_atom", fn -> Nx.add(:foo, 1) end},
      {"sum_list", fn -> Nx.sum([1, 2]) end},
      {"defn_list", fn -> add2([1, 2], 1) end},
      {"defn_tensor_list", fn -> add2(Nx.tensor(1.0), [1.0]) end},
      {"defn_string", fn -> add2("abc", 1) end},
      # select: the shape of a non-scalar predicate, which both branches must broadcast to
      {"select_pred_smaller",
       fn -> Nx.select(Nx.tensor([[1], [0]]), Nx.tensor([[1, 2, 3]]), 0) end},
      {"select_branch_larger",
       fn -> Nx.select(Nx.tensor([1, 0]), Nx.tensor([[1, 2], [3, 4]]), 0) end},
      {"select_scalar_pred", fn -> Nx.select(1, Nx.tensor([1, 2]), Nx.tensor([[3], [4]])) end},
      {"select_branches_broadcast",
       fn -> Nx.select(Nx.tensor([[1, 0], [0, 1]]), Nx.tensor([1, 2]), Nx.tensor([[5], [6]])) end}
    ]
  end

  # reduce, window_reduce and map with functions of numbers or of tensors, eagerly and inside
  # defn (test_elixir/nx_reduce_window_test.exs)
  def functions do
    [
      {"window_reduce_plain_add",
       fn -> Nx.window_reduce(Nx.iota({3, 3}), 0, {2, 2}, fn a, b -> a + b end) end},
      {"window_reduce_plain_max",
       fn ->
         Nx.window_reduce(Nx.iota({3, 3}, type: :f32), :neg_infinity, {2, 2}, &max(&1, &2))
       end},
      {"window_reduce_nx_add", fn -> Nx.window_reduce(Nx.iota({3, 3}), 0, {2, 2}, &Nx.add/2) end},
      {"window_reduce_plain_strides_padding",
       fn ->
         opts = [strides: [2, 2], padding: :same]
         Nx.window_reduce(Nx.iota({4, 4}), 1, {2, 2}, opts, fn a, b -> a * b end)
       end},
      {"window_reduce_plain_dilations",
       fn ->
         opts = [window_dilations: [1, 2], padding: [{0, 1}, {1, 0}]]
         Nx.window_reduce(Nx.iota({3, 4}, type: :f32), 0.5, {2, 2}, opts, &(&1 + &2 * 2))
       end},
      {"reduce_plain_add", fn -> Nx.reduce(Nx.iota({3}), 0, fn a, b -> a + b end) end},
      {"reduce_nx_add", fn -> Nx.reduce(Nx.iota({2, 3}), 0, [axes: [1]], &Nx.add/2) end},
      {"map_plain", fn -> Nx.map(Nx.iota({3}), fn a -> a + 1 end) end},
      {"map_eager_f64", fn -> Nx.map(Nx.iota({3}), [type: :f64], &Nx.exp/1) end},
      {"map_defn_f64_divide", fn -> map_divide_f64(Nx.tensor([1, 2], type: :u8)) end},
      {"map_eager_f64_multiply",
       fn -> Nx.map(Nx.tensor([1, 2]), [type: :f64], &Nx.multiply(&1, 0.1)) end},
      {"map_defn", fn -> map_add(Nx.tensor([1, 2])) end}
    ]
  end

  @doc """
  `{ours, nx}` for each case of `cases`: the line this Nx gives it, and real Nx 0.7.2's (the
  line of nx_0.7.2_programs.tsv with its name, nil where there is none).
  """
  def compare(cases) do
    reference =
      for line <-
            __DIR__
            |> Path.join("nx_0.7.2_programs.tsv")
            |> File.read!()
            |> String.split("\n", trim: true),
          into: %{},
          do: {line |> String.split("\t") |> hd(), line}

    for {name, _fun} = case <- cases, do: {line(case), reference[name]}
  end

  # one line: the name, then the result's type, shape and flat values (lists of integers as
  # lists, which Elixir 1.14 and 1.18 print alike), or the error's module and message
  def line({name, fun}) do
    line =
      try do
        r = fun.()
        type = Nx.Type.to_string(r.type)
        # (every value, and lists of small integers as lists: inspect's default limit would cut
        # a list after 50, and Elixir 1.18 prints [7] as ~c"\a")
        values = inspect(Nx.to_flat_list(r), limit: :infinity, charlists: :as_lists)
        "#{name}\tok\t#{type}\t#{inspect(r.shape)}\t#{values}"
      rescue
        e -> "#{name}\terror\t#{inspect(e.__struct__)}\t#{message(e)}"
      end

    String.replace(line, "\n", " ")
  end

  # A protocol's error is written from its fields, in Elixir 1.14's words, the ones of the
  # reference (1.18 words it otherwise, the value last), and without the list of the
  # protocol's implementations, which depends on the project that compiled the protocols.
  defp message(%Protocol.UndefinedError{protocol: protocol, value: value, description: text}) do
    ending = if text == "", do: ".", else: ", #{text}."

    "protocol #{inspect(protocol)} not implemented for #{inspect(value)} of type " <>
      type_name(value) <> ending
  end

  defp message(e), do: Exception.message(e)

  defp type_name(value) when is_list(value), do: "List"
  defp type_name(value) when is_binary(value), do: "BitString"
  defp type_name(value) when is_atom(value), do: "Atom"
  defp type_name(%module{}), do: "#{inspect(module)} (a struct)"
  defp type_name(value) when is_map(value), do: "Map"
  defp type_name(value) when is_tuple(value), do: "Tuple"
  defp type_name(value) when is_function(value), do: "Function"
  defp type_name(value) when is_integer(value), do: "Integer"
  defp type_name(value) when is_float(value), do: "Float"

  # vectorized axes shared in another order: Nx 0.7.2 reshapes the second operand's into the
  # first's order (test_elixir/nx_vectorize_test.exs); devectorized, so every leaf is plain
  def vectorized do
    xyr = fn ->
      Nx.iota({1, 2, 3}) |> Nx.vectorize(:x) |> Nx.vectorize(:y) |> Nx.vectorize(:rows)
    end

    rows = fn -> Nx.vectorize(Nx.iota({3}), :rows) end
    ab = fn -> Nx.iota({2, 3}) |> Nx.vectorize(:a) |> Nx.vectorize(:b) end
    ba = fn -> Nx.iota({3, 2}) |> Nx.multiply(10) |> Nx.vectorize(:b) |> Nx.vectorize(:a) end
    a4 = fn -> Nx.iota({2, 4}) |> Nx.vectorize(:a) end

    [
      {"vectorized_add_subset", fn -> Nx.devectorize(Nx.add(xyr.(), rows.())) end},
      {"vectorized_add_subset_first", fn -> Nx.devectorize(Nx.add(rows.(), xyr.())) end},
      {"vectorized_add_swapped", fn -> Nx.devectorize(Nx.add(ab.(), ba.())) end},
      {"vectorized_add_swapped_back", fn -> Nx.devectorize(Nx.add(ba.(), ab.())) end},
      {"vectorized_add_inner", fn -> Nx.devectorize(Nx.add(ba.(), a4.())) end},
      {"vectorized_select",
       fn -> Nx.devectorize(Nx.select(Nx.greater(ab.(), 2), ba.(), a4.())) end},
      {"vectorized_multiply_in_jit",
       fn -> Nx.devectorize(Nx.Defn.jit(&Nx.multiply/2).(ab.(), ba.())) end},
      {"vectorized_broadcast_vectors",
       fn ->
         ab.() |> then(&Nx.broadcast_vectors([&1, ba.()])) |> List.last() |> Nx.devectorize()
       end},
      {"vectorized_reshape_vectors",
       fn ->
         ab.() |> then(&Nx.reshape_vectors([&1, ba.()])) |> List.last() |> Nx.devectorize()
       end}
    ]
  end

  # bf16 and f16 element-wise math: Nx's binary backend computes on doubles and writes a bf16
  # by truncating the f32 (test_elixir/nx_elementwise_test.exs, numerics mode :nx)
  def half_floats do
    x = fn -> Nx.tensor([-1.0, -2.0, 0.1, 3.3, 7.77, -0.013], type: :bf16) end
    y = fn -> Nx.tensor([0.1, 0.2, 0.3, 0.7, -1.9, 5.5], type: :bf16) end
    h = fn -> Nx.as_type(x.(), :f16) end

    [
      {"bf16_tensor", fn -> x.() end},
      {"bf16_sigmoid", fn -> Nx.sigmoid(x.()) end},
      {"bf16_exp", fn -> Nx.exp(x.()) end},
      {"bf16_tanh", fn -> Nx.tanh(x.()) end},
      {"bf16_log", fn -> Nx.log(Nx.abs(x.())) end},
      {"bf16_sqrt", fn -> Nx.sqrt(Nx.abs(x.())) end},
      {"bf16_add", fn -> Nx.add(x.(), y.()) end},
      {"bf16_subtract", fn -> Nx.subtract(x.(), y.()) end},
      {"bf16_multiply", fn -> Nx.multiply(x.(), y.()) end},
      {"bf16_divide", fn -> Nx.divide(x.(), 3) end},
      {"bf16_pow", fn -> Nx.pow(Nx.abs(x.()), y.()) end},
      {"bf16_sum", fn -> Nx.sum(x.()) end},
      {"bf16_mean", fn -> Nx.mean(x.()) end},
      {"bf16_in_defn", fn -> Nx.Defn.jit(&Nx.multiply(Nx.exp(&1), &2)).(x.(), y.()) end},
      {"bf16_as_type_f32", fn -> Nx.as_type(Nx.tensor([0.1, 1.7, 3.14159, -2.71828]), :bf16) end},
      {"bf16_as_type_s64", fn -> Nx.as_type(Nx.tensor([100_000_001, 7, -123_457]), :bf16) end},
      {"f16_sigmoid", fn -> Nx.sigmoid(h.()) end},
      {"f16_exp", fn -> Nx.exp(h.()) end},
      {"f16_divide", fn -> Nx.divide(h.(), 3) end},
      {"f16_multiply", fn -> Nx.multiply(h.(), Nx.as_type(y.(), :f16)) end}
    ]
  end

  # a float number next to a tensor is an f32 first, then takes the merged type, eagerly and
  # in defn (test_elixir/nx_elementwise_test.exs)
  def float_numbers do
    f64 = fn -> Nx.tensor([1.0, 2.0], type: :f64) end

    [
      {"f64_times_tenth_eager", fn -> Nx.multiply(f64.(), 0.1) end},
      {"f64_times_tenth_defn", fn -> times_tenth(f64.()) end},
      {"f64_tenth_minus_defn", fn -> tenth_minus(f64.()) end},
      {"f64_pow_tenth_defn", fn -> pow_tenth(f64.()) end},
      {"f64_plus_tiny", fn -> Nx.add(f64.(), 1.0e-10) end},
      {"f64_plus_huge", fn -> Nx.add(f64.(), 1.0e300) end},
      {"f64_equal_tenth", fn -> Nx.equal(Nx.tensor([0.1, 0.5], type: :f64), 0.1) end},
      {"f64_greater_tenth", fn -> Nx.greater(Nx.tensor([0.1, 0.5], type: :f64), 0.1) end},
      {"f64_min_tenth", fn -> Nx.min(Nx.tensor([0.1, 0.5], type: :f64), 0.1) end},
      {"f64_remainder", fn -> Nx.remainder(f64.(), 0.3) end},
      {"f64_select_tenth", fn -> Nx.select(Nx.tensor([1, 0]), f64.(), 0.1) end},
      {"f64_clip", fn -> Nx.clip(f64.(), 0.1, 1.7) end},
      {"c128_times_complex",
       fn -> Nx.multiply(Nx.tensor([1.0], type: :c128), Complex.new(0.1, 0.3)) end},
      {"f16_times_tenth_defn", fn -> times_tenth(Nx.tensor([1.0, 2.0], type: :f16)) end},
      {"bf16_times_tenth", fn -> Nx.multiply(Nx.tensor([3.0], type: :bf16), 0.1) end},
      {"s64_plus_big_integer", fn -> Nx.add(f64.(), 16_777_217) end}
    ]
  end

  # Nx.LinAlg.svd: Nx 0.7.2's QDWH polar decomposition, then eigh of the Hermitian factor
  # (test_elixir/nx_svd_test.exs, numerics mode :nx); three cases (u, s, vt) per matrix
  def decompositions do
    # entries sin(0.3 k^2), k = 1, 2, ...: full rank
    generic = fn shape, type ->
      k = Nx.iota(shape, type: type) |> Nx.add(1)
      k |> Nx.multiply(k) |> Nx.multiply(0.3) |> Nx.sin()
    end

    matrices = [
      {"square_f32", fn -> Nx.tensor([[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.25, 1.0, 4.0]]) end,
       []},
      {"square_f64",
       fn -> Nx.tensor([[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.25, 1.0, 4.0]], type: :f64) end,
       []},
      {"iota_square_s64", fn -> Nx.iota({4, 4}) end, []},
      {"generic_5x5_f32", fn -> generic.({5, 5}, :f32) end, []},
      {"generic_5x5_f64", fn -> generic.({5, 5}, :f64) end, []},
      {"tall_4x2_f32", fn -> generic.({4, 2}, :f32) end, []},
      {"tall_4x2_f32_reduced", fn -> generic.({4, 2}, :f32) end, [full_matrices?: false]},
      {"tall_8x7_f32_reduced", fn -> generic.({8, 7}, :f32) end, [full_matrices?: false]},
      {"tall_8x7_f64", fn -> generic.({8, 7}, :f64) end, []},
      {"wide_2x3_f32", fn -> generic.({2, 3}, :f32) end, []},
      {"wide_2x3_f32_reduced", fn -> generic.({2, 3}, :f32) end, [full_matrices?: false]},
      {"wide_3x5_f64_reduced", fn -> generic.({3, 5}, :f64) end, [full_matrices?: false]},
      {"rank_one_f32", fn -> Nx.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]]) end,
       []},
      {"rank_two_tall_f32",
       fn ->
         Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [10.0, 11.0, 12.0]])
       end, []},
      {"triangular_f32", fn -> Nx.tensor([[1.0, 2.0, 3.0], [0.0, 4.0, 0.0], [0.0, 0.0, 9.0]]) end,
       []},
      {"diagonal_s64", fn -> Nx.tensor([[2, 0, 0], [0, 3, 0], [0, 0, -1], [0, 0, 0]]) end, []},
      {"batched_f32", fn -> generic.({2, 3, 3}, :f32) end, []},
      {"rank_two_5x5_f64", fn -> Nx.iota({5, 5}, type: :f64) |> Nx.add(1) |> Nx.sin() end, []},
      {"zeros_f32", fn -> Nx.broadcast(0.0, {2, 3}) end, []},
      {"column_s64", fn -> Nx.tensor([[-2], [1]]) end, []},
      {"max_iter_2_f32", fn -> generic.({3, 3}, :f32) end, [max_iter: 2]}
    ]

    for {name, fun, opts} <- matrices, {part, i} <- [{"u", 0}, {"s", 1}, {"vt", 2}] do
      {"svd_#{name}_#{part}", fn -> fun.() |> Nx.LinAlg.svd(opts) |> elem(i) end}
    end
  end
end
