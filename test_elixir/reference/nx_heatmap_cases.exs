# The cases of test_elixir/nx_heatmap_test.exs: Nx.to_heatmap/2 printed by `inspect`, with and
# without ANSI colours, over ranks, types, names, vectorized axes, non-finite values, limits
# and syntax colours. Evaluated by the test and by nx_heatmap_reference.exs against real Nx
# 0.7.2. Each case is {name, fun}; the last element of the list is the function that writes
# a case's answer on one line (shared by the generator and the test, so they cannot drift
# apart): `ok <TAB> inspect(string)` (escapes written as Elixir writes them, no printable
# limit) or `error <TAB> Module: message`.
off = [ansi_enabled: false]
on = [ansi_enabled: true]
show = fn tensor, opts -> inspect(Nx.to_heatmap(tensor, opts)) end

s5 = Nx.tensor([1, 2, 3, 4, 5])
s43 = Nx.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]])
s223 = Nx.tensor([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]])
non_finite = Nx.tensor([:neg_infinity, -1, :nan, 1, :infinity])
# (k / 18) * 9 falls on either side of the halves that round/1 breaks upwards
halves = Nx.tensor(Enum.to_list(0..18), type: :f32)
floats = Nx.tensor([[0.1, -2.5, 3.75], [1.0e-3, 42.0, -0.5]], type: :f64)

cases = [
  {"equal_off", fn -> show.(Nx.tensor([1, 1, 1]), off) end},
  {"equal_on", fn -> show.(Nx.tensor([1, 1, 1]), on) end},
  {"rank1_off", fn -> show.(s5, off) end},
  {"rank1_on", fn -> show.(s5, on) end},
  {"rank2_off", fn -> show.(s43, off) end},
  {"rank2_on", fn -> show.(s43, on) end},
  {"rank3_off", fn -> show.(s223, off) end},
  {"rank3_on", fn -> show.(s223, on) end},
  {"rank4_off", fn -> show.(Nx.iota({2, 2, 2, 3}), off) end},
  {"rank4_on", fn -> show.(Nx.iota({2, 2, 2, 3}), on) end},
  {"vectorized_off", fn -> show.(Nx.vectorize(s223, :x), off) end},
  {"vectorized_on", fn -> show.(Nx.vectorize(s223, :x), on) end},
  {"vectorized2_off",
   fn -> show.(Nx.iota({2, 3, 4}) |> Nx.vectorize(:a) |> Nx.vectorize(:b), off) end},
  {"names_off", fn -> show.(Nx.iota({2, 3, 4}, names: [:b, :r, nil]), off) end},
  {"names_on", fn -> show.(Nx.iota({2, 3}, names: [:r, :c]), on) end},
  {"non_finite_off", fn -> show.(non_finite, off) end},
  {"non_finite_on", fn -> show.(non_finite, on) end},
  {"non_finite2_off", fn -> show.(Nx.stack([non_finite, non_finite]), off) end},
  {"non_finite2_on", fn -> show.(Nx.stack([non_finite, Nx.reverse(non_finite)]), on) end},
  {"all_nan_off", fn -> show.(Nx.tensor([:nan, :nan]), off) end},
  {"all_inf_on", fn -> show.(Nx.tensor([[:infinity, :neg_infinity]]), on) end},
  {"halves_off", fn -> show.(halves, off) end},
  {"halves_on", fn -> show.(halves, on) end},
  {"floats_off", fn -> show.(floats, off) end},
  {"floats_on", fn -> show.(floats, on) end},
  {"f16_on", fn -> show.(Nx.tensor([0.1, 0.2, 0.7, 0.9], type: :f16), on) end},
  {"bf16_off", fn -> show.(Nx.tensor([[0.1, 0.2], [0.7, 0.9]], type: :bf16), off) end},
  {"u8_off", fn -> show.(Nx.tensor([[0, 255], [128, 64]], type: :u8), off) end},
  {"s8_on", fn -> show.(Nx.tensor([-128, -1, 0, 127], type: :s8), on) end},
  {"u64_off",
   fn ->
     show.(Nx.tensor([0, 9_223_372_036_854_775_808, 18_446_744_073_709_551_615], type: :u64), off)
   end},
  {"s64_big_off",
   fn -> show.(Nx.tensor([-9_223_372_036_854_775_808, 0, 9_223_372_036_854_775_807]), off) end},
  {"whitespace_on", fn -> show.(s5, ansi_enabled: true, ansi_whitespace: "  ") end},
  {"whitespace_off", fn -> show.(s5, ansi_enabled: false, ansi_whitespace: "  ") end},
  {"one_row_off", fn -> show.(Nx.tensor([[3, 1, 2]]), off) end},
  {"one_column_on", fn -> show.(Nx.tensor([[3], [1], [2]]), on) end},
  {"limit_2", fn -> inspect(Nx.to_heatmap(Nx.iota({5, 2, 2}), off), limit: 2) end},
  {"limit_3_rank4", fn -> inspect(Nx.to_heatmap(Nx.iota({3, 2, 2, 2}), off), limit: 3) end},
  {"limit_4_rank4", fn -> inspect(Nx.to_heatmap(Nx.iota({2, 3, 2, 2}), off), limit: 4) end},
  {"limit_1_rank2", fn -> inspect(Nx.to_heatmap(Nx.iota({3, 3}), off), limit: 1) end},
  {"limit_1_rank1", fn -> inspect(Nx.to_heatmap(Nx.iota({70}), off), limit: 1) end},
  {"limit_0_rank3", fn -> inspect(Nx.to_heatmap(Nx.iota({2, 2, 3}), off), limit: 0) end},
  {"limit_0_rank2", fn -> inspect(Nx.to_heatmap(Nx.iota({2, 3}), off), limit: 0) end},
  {"limit_default", fn -> show.(Nx.iota({55, 1, 2}), off) end},
  {"limit_infinity",
   fn -> inspect(Nx.to_heatmap(Nx.iota({55, 1, 2}), off), limit: :infinity) end},
  {"syntax_colors",
   fn ->
     colors = [atom: :red, list: :blue, map: :green, number: :yellow, reset: :cyan]
     inspect(Nx.to_heatmap(Nx.vectorize(s223, :x), off), syntax_colors: colors)
   end},
  {"in_list", fn -> inspect([Nx.to_heatmap(s223, off), 1]) end},
  {"in_map", fn -> inspect(%{a: Nx.to_heatmap(s5, off)}) end},
  {"access_row", fn -> show.(Nx.to_heatmap(s43, off)[1].tensor, off) end},
  {"access_row_opts", fn -> inspect(Nx.to_heatmap(s43, off)[1..2]) end},
  {"access_scalar", fn -> inspect(Nx.to_heatmap(s43, off)[[1, 2]]) end},
  {"truthy_ansi", fn -> show.(Nx.tensor([1, 2]), ansi_enabled: 1) end},
  {"unknown_option", fn -> show.(Nx.tensor([1, 2]), foo: 1, ansi_enabled: false) end},
  {"complex", fn -> show.(Nx.tensor([Complex.new(1, 2), Complex.new(0, 0)]), off) end},
  {"scalar", fn -> show.(Nx.tensor(1), off) end},
  {"number", fn -> show.(7, off) end},
  {"bad_opts", fn -> inspect(Nx.to_heatmap(s5, :ansi)) end}
]

answer = fn fun ->
  try do
    "ok\t" <> inspect(fun.(), printable_limit: :infinity, limit: :infinity)
  rescue
    e -> "error\t" <> inspect(e.__struct__) <> ": " <> Exception.message(e)
  end
  |> String.replace("\n", "\\n")
end

{cases, answer}
