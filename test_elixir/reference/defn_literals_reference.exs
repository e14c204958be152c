# Prints the reference values of test_elixir/defn_literals_test.exs: run against real Nx 0.7.2
# (Nx.BinaryBackend, Nx.Defn.Evaluator), from its mix project:
#
#     cd /path/to/nx-0.7.2/nx && mix run /path/to/nx_jax/test_elixir/reference/defn_literals_reference.exs
#
#       > /path/to/nx_jax/test_elixir/reference/nx_0.7.2_defn_literals.tsv
#
# One line per case: name, then the type and flat values of each result. The test loads this
# file (its module, not the run below, which needs real Nx) and checks every case against
# that TSV.
defmodule DefnLiteralsReference do
  import Nx.Defn

  # and/or/not and comparisons of values known at trace time (issue 46, item 4)
  defn shape_cond(x) do
    {_, n} = Nx.shape(x)

    cond do
      n == 1 and n != 2 -> Nx.concatenate([x, x], axis: 1)
      true -> x
    end
  end

  defn shape_if_or(x) do
    {_, n} = Nx.shape(x)
    if n > 20 or n < 5, do: x * 2, else: Nx.concatenate([x, x], axis: 1)
  end

  defn option_if(x, opts \\ []) do
    if opts[:flag] and opts[:n] > 2, do: x * 2, else: x
  end

  defn option_not(x, opts \\ []) do
    if not opts[:flag], do: x * 2, else: x
  end

  defn known_values(x) do
    {_, n} = Nx.shape(x)

    {n == 3, n != 3, n < 4, n == 3 and n > 1, n == 2 or n == 3, 1 and 2, 0 or 0, not 0, not 2.5,
     true and false, not true, true == 1, 1 == 1.0}
  end

  defn tensor_logic(x, y), do: {x and y, x or y, not x, x and 1, true and y, x == true}

  # number literals and types (issue 46, item 6)
  defn reduce_mul(t), do: Nx.reduce(t, 1, fn a, b -> a * b end)
  defn reduce_float(t), do: Nx.reduce(t, 1.5, fn a, b -> a + b end)
  defn reduce_acc(t, acc), do: Nx.reduce(t, acc, fn a, b -> a + b end)
  defn window_zero(t), do: Nx.window_reduce(t, 0, {2}, fn a, b -> a + b end)
  defn window_float(t), do: Nx.window_reduce(t, 0.5, {2}, fn a, b -> a + b end)
  defn window_acc(t, acc), do: Nx.window_reduce(t, acc, {2}, fn a, b -> a + b end)
  defn if_u8(x), do: if(x > 0, do: Nx.u8(1))
  defn if_no_else(x, y), do: if(x > 0, do: y)
  defn if_float_else(x, y), do: if(x > 0, do: y, else: 1.5)
  defn if_float_do(x, y), do: if(x > 0, do: 1.5, else: y)
  defn if_numbers(x), do: if(x > 0, do: 1, else: 2.5)
  defn if_integers(x), do: if(x > 0, do: 1, else: 2)

  defn cond_zero(x, y) do
    cond do
      x > 0 -> y
      true -> 0
    end
  end

  defn cond_two_literals(x, y) do
    cond do
      x > 0 -> y
      x < -5 -> 0
      true -> 1
    end
  end

  defn cond_tensor_last(x, y) do
    cond do
      x > 0 -> 0
      x < -5 -> 1
      true -> y
    end
  end

  defn cond_float_literal(x, y) do
    cond do
      x > 0 -> 0
      x < -5 -> 2.5
      true -> y
    end
  end

  defn select_zero(p, y), do: Nx.select(p, y, 0)
  defn select_float(p, y), do: Nx.select(p, 1.5, y)
  defn clip_integers(y), do: Nx.clip(y, 0, 1)
  defn clip_float(y), do: Nx.clip(y, 0.5, 1)

  defn while_if(x) do
    while {x, i = 0}, i < 3 do
      {if(x > 100, do: x, else: x + 1), i + 1}
    end
  end

  defn while_cond(x) do
    while {x, i = 0}, i < 3 do
      {cond do
         x > 100 -> x
         true -> 0
       end, i + 1}
    end
  end

  defn tuple_if(x, y), do: if(x > 0, do: {y, 1}, else: {0, y})

  def cases do
    x = Nx.iota({4, 3})
    u8 = Nx.tensor([1, 2, 3, 4], type: :u8)
    f16 = Nx.as_type(u8, :f16)
    bf16 = Nx.as_type(u8, :bf16)
    mask = Nx.tensor([1, 0, 1, 0])

    [
      shape_cond: fn -> shape_cond(x) end,
      shape_if_or: fn -> shape_if_or(x) end,
      option_if_true: fn -> option_if(x, flag: true, n: 3) end,
      option_if_false: fn -> option_if(x, flag: false, n: 3) end,
      option_not: fn -> option_not(x, flag: false) end,
      known_values: fn -> known_values(x) end,
      tensor_logic: fn -> tensor_logic(Nx.tensor([0, 1, 2]), Nx.tensor([1.0, 0.0, 3.0])) end,
      reduce_mul_u8: fn -> reduce_mul(u8) end,
      reduce_mul_s8: fn -> reduce_mul(Nx.as_type(u8, :s8)) end,
      reduce_mul_f16: fn -> reduce_mul(f16) end,
      reduce_mul_bf16: fn -> reduce_mul(bf16) end,
      reduce_float_u8: fn -> reduce_float(u8) end,
      reduce_float_s32: fn -> reduce_float(Nx.as_type(u8, :s32)) end,
      reduce_float_f16: fn -> reduce_float(f16) end,
      reduce_float_bf16: fn -> reduce_float(bf16) end,
      reduce_float_f64: fn -> reduce_float(Nx.as_type(u8, :f64)) end,
      reduce_acc_s64: fn -> reduce_acc(u8, Nx.tensor(1)) end,
      reduce_acc_f32: fn -> reduce_acc(u8, Nx.tensor(1.0)) end,
      window_zero_u8: fn -> window_zero(u8) end,
      window_float_f16: fn -> window_float(f16) end,
      window_acc_s64: fn -> window_acc(u8, Nx.tensor(300)) end,
      if_u8_true: fn -> if_u8(Nx.tensor(1)) end,
      if_u8_false: fn -> if_u8(Nx.tensor(-1)) end,
      if_no_else_u8: fn -> if_no_else(Nx.tensor(1), u8) end,
      if_no_else_f16: fn -> if_no_else(Nx.tensor(1), f16) end,
      if_no_else_bf16: fn -> if_no_else(Nx.tensor(-1), bf16) end,
      if_float_else_u8: fn -> if_float_else(Nx.tensor(-1), u8) end,
      if_float_else_s32: fn -> if_float_else(Nx.tensor(-1), Nx.as_type(u8, :s32)) end,
      if_float_else_f16: fn -> if_float_else(Nx.tensor(-1), f16) end,
      if_float_else_bf16: fn -> if_float_else(Nx.tensor(-1), bf16) end,
      if_float_else_f64: fn -> if_float_else(Nx.tensor(-1), Nx.as_type(u8, :f64)) end,
      if_float_do_f16: fn -> if_float_do(Nx.tensor(1), f16) end,
      if_numbers: fn -> if_numbers(Nx.tensor(1)) end,
      if_integers: fn -> if_integers(Nx.tensor(1)) end,
      cond_zero_u8: fn -> cond_zero(Nx.tensor(-1), u8) end,
      cond_zero_f16: fn -> cond_zero(Nx.tensor(-1), f16) end,
      cond_two_literals_u8: fn -> cond_two_literals(Nx.tensor(-1), u8) end,
      cond_tensor_last_u8: fn -> cond_tensor_last(Nx.tensor(-1), u8) end,
      cond_float_literal_u8: fn -> cond_float_literal(Nx.tensor(-9), u8) end,
      cond_float_literal_f16: fn -> cond_float_literal(Nx.tensor(-9), f16) end,
      select_zero_u8: fn -> select_zero(mask, u8) end,
      select_zero_f16: fn -> select_zero(mask, f16) end,
      select_float_f16: fn -> select_float(mask, f16) end,
      clip_integers_u8: fn -> clip_integers(u8) end,
      clip_integers_f16: fn -> clip_integers(f16) end,
      clip_float_u8: fn -> clip_float(u8) end,
      while_if_u8: fn -> while_if(Nx.u8(7)) end,
      while_cond_u8: fn -> while_cond(Nx.u8(7)) end,
      tuple_if_u8: fn -> tuple_if(Nx.tensor(-1), u8) end
    ]
  end

  def describe(%Nx.Tensor{} = t),
    do: "#{Nx.Type.to_string(t.type)} #{inspect(Nx.to_flat_list(t), charlists: :as_lists)}"

  def describe(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map_join(" | ", &describe/1)
end

if Code.ensure_loaded?(Nx.Defn.Evaluator) and not Code.ensure_loaded?(NxJax) do
  for {name, fun} <- DefnLiteralsReference.cases() do
    line =
      try do
        DefnLiteralsReference.describe(fun.())
      rescue
        e -> "raises #{inspect(e.__struct__)}"
      end

    IO.puts("#{name}\t#{line}")
  end
end
