# The cases of test_elixir/nx_names_test.exs: axis names through creation, options and ops
# (Nx 0.7.2's rules). Evaluated by the test and by nx_names_reference.exs against real Nx
# 0.7.2; each case is {name, fun}, `t` is s64[x: 2][y: 3].
t = Nx.tensor([[1, 2, 3], [4, 5, 6]], names: [:x, :y])
_ = t

[
  {"tensor", fn -> t end},
  {"names", fn -> Nx.names(t) end},
  {"tensor_badnames", fn -> Nx.tensor([1, 2], names: [:x, :y]) end},
  {"tensor_of_tensor", fn -> Nx.tensor(t, names: [:a, :b]) |> Nx.names() end},
  {"rename", fn -> Nx.rename(t, [:a, nil]) end},
  {"rename_bad", fn -> Nx.rename(t, [:a]) end},
  {"iota", fn -> Nx.iota({2, 3}, names: [:r, :c]) end},
  {"iota_axis_name", fn -> Nx.iota({2, 3}, names: [:r, :c], axis: :c) end},
  {"eye", fn -> Nx.eye(2, names: [:i, :j]) end},
  {"broadcast", fn -> Nx.broadcast(1, {2, 2}, names: [:a, :b]) end},
  {"broadcast_t", fn -> Nx.broadcast(Nx.tensor([1, 2], names: [:y]), {3, 2}) |> Nx.names() end},
  {"template", fn -> Nx.template({2}, :f32, names: [:x]) end},
  {"from_binary", fn -> Nx.from_binary(<<1, 2>>, :u8, names: [:x]) end},
  {"reshape", fn -> Nx.reshape(t, {3, 2}, names: [:p, :q]) end},
  {"reshape_nonames", fn -> Nx.reshape(t, {3, 2}) |> Nx.names() end},
  {"reshape_same_shape", fn -> Nx.reshape(t, {2, 3}) |> Nx.names() end},
  {"add_merge",
   fn ->
     Nx.add(Nx.tensor([[1, 2]], names: [nil, :y]), Nx.tensor([[1], [2]], names: [:x, nil]))
   end},
  {"add_conflict",
   fn -> Nx.add(Nx.tensor([1, 2], names: [:x]), Nx.tensor([1, 2], names: [:y])) end},
  {"add_conflict2",
   fn -> Nx.add(Nx.tensor([[1, 2]], names: [:a, :b]), Nx.tensor([[1, 2]], names: [:a, :c])) end},
  {"add_conflict3",
   fn -> Nx.add(Nx.tensor([[1, 2], [3, 4]], names: [:a, :b]), Nx.tensor([1, 2], names: [:c])) end},
  {"add_rank", fn -> Nx.add(t, Nx.tensor([1, 2, 3], names: [:z])) end},
  {"add_rank_ok", fn -> Nx.add(t, Nx.tensor([1, 2, 3])) |> Nx.names() end},
  {"add_scalar", fn -> Nx.add(t, 1) |> Nx.names() end},
  {"equal", fn -> Nx.equal(t, 1) |> Nx.names() end},
  {"exp", fn -> Nx.exp(t) |> Nx.names() end},
  {"as_type", fn -> Nx.as_type(t, :f32) |> Nx.names() end},
  {"bitcast", fn -> Nx.bitcast(t, :f64) |> Nx.names() end},
  {"sum", fn -> Nx.sum(t, axes: [:x]) end},
  {"sum_keep", fn -> Nx.sum(t, axes: [:y], keep_axes: true) end},
  {"sum_all", fn -> Nx.sum(t) |> Nx.names() end},
  {"sum_all_keep", fn -> Nx.sum(t, keep_axes: true) |> Nx.names() end},
  {"sum_badname", fn -> Nx.sum(t, axes: [:z]) end},
  {"sum_nil_axis", fn -> Nx.sum(t, axes: [nil]) end},
  {"sum_float_axis", fn -> Nx.sum(t, axes: [1.0]) end},
  {"mean", fn -> Nx.mean(t, axes: [:y]) |> Nx.names() end},
  {"argmax", fn -> Nx.argmax(t, axis: :y) end},
  {"argmax_keep", fn -> Nx.argmax(t, axis: :y, keep_axis: true) |> Nx.names() end},
  {"argmax_all", fn -> Nx.argmax(t) |> Nx.names() end},
  {"reduce_max", fn -> Nx.reduce_max(t, axes: [:x]) |> Nx.names() end},
  {"all", fn -> Nx.all(t, axes: [:x]) |> Nx.names() end},
  {"transpose", fn -> Nx.transpose(t) end},
  {"transpose_named",
   fn ->
     Nx.transpose(Nx.iota({2, 3, 4}, names: [:a, :b, :c]), axes: [:c, :a, :b]) |> Nx.names()
   end},
  {"squeeze", fn -> Nx.squeeze(Nx.iota({1, 3, 1}, names: [:a, :b, :c])) |> Nx.names() end},
  {"squeeze_axes",
   fn -> Nx.squeeze(Nx.iota({1, 3, 1}, names: [:a, :b, :c]), axes: [:a]) |> Nx.names() end},
  {"new_axis", fn -> Nx.new_axis(t, 1, :n) end},
  {"new_axis_noname", fn -> Nx.new_axis(t, -1) |> Nx.names() end},
  {"slice", fn -> Nx.slice(t, [0, 1], [1, 2]) |> Nx.names() end},
  {"slice_along_axis", fn -> Nx.slice_along_axis(t, 0, 2, axis: :y) end},
  {"put_slice",
   fn -> Nx.put_slice(t, [0, 0], Nx.tensor([[9]], names: [nil, :y])) |> Nx.names() end},
  {"put_slice_conflict",
   fn -> Nx.put_slice(t, [0, 0], Nx.tensor([[9]], names: [:q, :y])) |> Nx.names() end},
  {"access", fn -> t[0] end},
  {"access_range", fn -> t[[.., 1..2]] |> Nx.names() end},
  {"access_named", fn -> t[y: 1] end},
  {"access_named2", fn -> t[x: 0..0, y: 1] end},
  {"concatenate", fn -> Nx.concatenate([t, t]) |> Nx.names() end},
  {"concatenate_mixed",
   fn ->
     Nx.concatenate([Nx.tensor([[1]], names: [:a, nil]), Nx.tensor([[1]], names: [nil, :b])])
     |> Nx.names()
   end},
  {"concatenate_conflict",
   fn ->
     Nx.concatenate([Nx.tensor([[1]], names: [:a, nil]), Nx.tensor([[1]], names: [:c, nil])])
     |> Nx.names()
   end},
  {"concatenate_axis", fn -> Nx.concatenate([t, t], axis: :y) |> Nx.names() end},
  {"stack", fn -> Nx.stack([t, t]) |> Nx.names() end},
  {"stack_name", fn -> Nx.stack([t, t], name: :s) |> Nx.names() end},
  {"stack_axis", fn -> Nx.stack([t, t], axis: 1, name: :s) |> Nx.names() end},
  {"dot", fn -> Nx.dot(t, Nx.tensor([[1, 2], [3, 4], [5, 6]], names: [:k, :z])) end},
  {"dot_dup", fn -> Nx.dot(t, Nx.tensor([[1, 2], [3, 4], [5, 6]], names: [:k, :x])) end},
  {"dot_vec", fn -> Nx.dot(t, Nx.tensor([1, 2, 3], names: [:k])) |> Nx.names() end},
  {"dot_axes",
   fn ->
     Nx.dot(t, [:y], Nx.tensor([[1, 2], [3, 4], [5, 6]], names: [:k, :z]), [0]) |> Nx.names()
   end},
  {"dot_batch",
   fn ->
     Nx.dot(
       Nx.iota({2, 2, 3}, names: [:b, :i, :k]),
       [2],
       [0],
       Nx.iota({2, 3, 2}, names: [:b2, :k, :j]),
       [1],
       [0]
     )
     |> Nx.names()
   end},
  {"outer",
   fn ->
     Nx.outer(Nx.tensor([1, 2], names: [:x]), Nx.tensor([1, 2], names: [:y])) |> Nx.names()
   end},
  {"select",
   fn ->
     Nx.select(Nx.tensor([1, 0], names: [:x]), 1, Nx.tensor([[1, 2]], names: [:w, nil]))
     |> Nx.names()
   end},
  {"clip", fn -> Nx.clip(t, 1, 2) |> Nx.names() end},
  {"pad", fn -> Nx.pad(t, 0, [{1, 1, 0}, {0, 0, 0}]) |> Nx.names() end},
  {"reverse", fn -> Nx.reverse(t, axes: [:x]) |> Nx.names() end},
  {"sort", fn -> Nx.sort(t, axis: :y) |> Nx.names() end},
  {"argsort", fn -> Nx.argsort(t, axis: :y) |> Nx.names() end},
  {"cumsum", fn -> Nx.cumulative_sum(t, axis: :y) |> Nx.names() end},
  {"take", fn -> Nx.take(t, Nx.tensor([0, 0]), axis: :y) |> Nx.names() end},
  {"take_along_axis",
   fn -> Nx.take_along_axis(t, Nx.tensor([[0], [1]]), axis: :y) |> Nx.names() end},
  {"gather", fn -> Nx.gather(t, Nx.tensor([[0, 1]])) |> Nx.names() end},
  {"indexed_add", fn -> Nx.indexed_add(t, Nx.tensor([[0, 1]]), Nx.tensor([1])) |> Nx.names() end},
  {"window_sum", fn -> Nx.window_sum(t, {1, 2}) |> Nx.names() end},
  {"flatten", fn -> Nx.flatten(t) |> Nx.names() end},
  {"axis_index", fn -> Nx.axis_index(t, :y) end},
  {"axis_size", fn -> Nx.axis_size(t, :y) end},
  {"axis_index_bad", fn -> Nx.axis_index(t, :z) end},
  {"shape", fn -> Nx.shape(t) end},
  {"vectorize", fn -> Nx.vectorize(t, :x) |> Nx.names() end},
  {"devectorize", fn -> Nx.vectorize(t, :v) |> Nx.devectorize() |> Nx.names() end},
  {"devectorize_nokeep",
   fn -> Nx.vectorize(t, :v) |> Nx.devectorize(keep_names: false) |> Nx.names() end},
  {"defn", fn -> Nx.Defn.jit(fn x -> Nx.sum(Nx.multiply(x, 1.5), axes: [:x]) end).(t) end},
  {"defn_identity", fn -> Nx.Defn.jit(fn x -> x end).(t) |> Nx.names() end},
  {"defn_add",
   fn ->
     Nx.Defn.jit(fn x, y -> Nx.add(x, y) end).(Nx.tensor([1, 2], names: [:x]), Nx.tensor([1, 2]))
     |> Nx.names()
   end},
  {"squeeze_named_error", fn -> Nx.squeeze(t, axes: [:x]) end},
  {"broadcast_names_opt",
   fn -> Nx.broadcast(Nx.tensor([1, 2], names: [:y]), {3, 2}, names: [:a, :b]) |> Nx.names() end},
  {"broadcast_tensor_shape",
   fn -> Nx.broadcast(Nx.tensor([1, 2]), Nx.iota({3, 2}, names: [:a, :b])) |> Nx.names() end},
  {"logsumexp", fn -> Nx.logsumexp(t, axes: [:y]) |> Nx.names() end},
  {"variance", fn -> Nx.variance(t, axes: [:y]) |> Nx.names() end},
  {"product", fn -> Nx.product(t, axes: [:y]) |> Nx.names() end},
  {"conv",
   fn ->
     Nx.conv(
       Nx.iota({1, 1, 3, 3}, names: [:n, :c, :h, :w], type: :f32),
       Nx.iota({1, 1, 2, 2}, type: :f32)
     )
     |> Nx.names()
   end},
  {"fft", fn -> Nx.fft(Nx.tensor([1, 2], names: [:x])) |> Nx.names() end},
  {"real", fn -> Nx.real(Nx.tensor([1, 2], names: [:x])) |> Nx.names() end},
  {"quotient", fn -> Nx.quotient(t, 2) |> Nx.names() end},
  {"iota_names_bad", fn -> Nx.iota({2}, names: [:a, :b]) end},
  {"tensor_scalar_names", fn -> Nx.tensor(1, names: []) end},
  {"defn_grad",
   fn ->
     Nx.Defn.grad(Nx.tensor([1.0, 2.0], names: [:x]), fn x -> Nx.sum(Nx.multiply(x, x)) end)
   end},
  {"defn_inside_sum",
   fn -> Nx.Defn.jit(fn x -> Nx.sum(x, axes: [:y], keep_axes: true) end).(t) end},
  {"defn_inside_rename", fn -> Nx.Defn.jit(fn x -> Nx.rename(x, [:a, :b]) end).(t) end},
  {"defn_inside_transpose",
   fn -> Nx.Defn.jit(fn x -> Nx.transpose(x, axes: [:y, :x]) end).(t) end},
  {"defn_inside_conflict",
   fn ->
     Nx.Defn.jit(fn x, y -> Nx.add(x, y) end).(
       t,
       Nx.tensor([[1, 2, 3], [4, 5, 6]], names: [:z, nil])
     )
   end},
  {"eager_after_other_names", fn -> Nx.add(Nx.tensor([1, 2], names: [:p]), 1) end},
  {"vectorized_names", fn -> Nx.vectorize(Nx.iota({2, 3}, names: [:a, :b]), :v) |> Nx.add(1) end},
  {"new_axis_named_sum", fn -> Nx.new_axis(t, 0, :b) |> Nx.sum(axes: [:b]) end},
  {"squeeze_named", fn -> Nx.squeeze(Nx.iota({1, 3}, names: [:a, :b]), axes: [:a]) end},
  {"reduce_max_keep", fn -> Nx.reduce_max(t, axes: [:x], keep_axes: true) end},
  {"cumsum_named", fn -> Nx.cumulative_sum(t, axis: :x) end},
  {"window_max", fn -> Nx.window_max(t, {1, 2}) |> Nx.names() end},
  {"slice_dynamic", fn -> Nx.slice(t, [Nx.tensor(0), 1], [1, 2]) |> Nx.names() end},
  {"take_matrix_indices",
   fn -> Nx.take(t, Nx.tensor([[0, 1]], names: [:i, :j]), axis: :y) |> Nx.names() end},
  {"take_conflict", fn -> Nx.take(t, Nx.tensor([0, 1], names: [:i]), axis: :y) end},
  {"select_scalar_pred",
   fn -> Nx.select(1, t, Nx.tensor([1, 2, 3], names: [nil])) |> Nx.names() end},
  {"select_pred_names",
   fn -> Nx.select(Nx.tensor([[1, 0, 1], [0, 1, 0]], names: [:p, :q]), t, 0) |> Nx.names() end},
  {"axis_size_name", fn -> Nx.axis_size(t, :x) end},
  {"stack_conflict", fn -> Nx.stack([t, Nx.rename(t, [:z, :y])]) end},
  {"reshape_tensor_shape",
   fn -> Nx.reshape(t, Nx.template({3, 2}, :f32, names: [:m, :n])) |> Nx.names() end},
  {"iota_tensor_shape", fn -> Nx.iota(t) |> Nx.names() end},
  {"broadcast_axes_named",
   fn -> Nx.broadcast(Nx.tensor([1, 2], names: [:x]), {2, 3}, axes: [:x]) |> Nx.names() end},
  {"print_partial", fn -> Nx.tensor([[1.5, 2.5]], names: [nil, :col]) end},
  {"argmin_named", fn -> Nx.argmin(t, axis: :x, tie_break: :high) end},
  {"dot_contract_named",
   fn -> Nx.dot(t, [:x], Nx.tensor([1, 2], names: [:k]), [:k]) |> Nx.names() end},
  {"conv_permuted",
   fn ->
     Nx.conv(
       Nx.iota({1, 3, 3, 1}, names: [:n, :h, :w, :c], type: :f32),
       Nx.iota({1, 1, 2, 2}, type: :f32),
       input_permutation: [:n, :c, :h, :w],
       output_permutation: [0, 2, 3, 1]
     )
   end},
  {"conv_named_kernel",
   fn ->
     Nx.conv(
       Nx.iota({1, 1, 3, 3}, type: :f32),
       Nx.iota({1, 1, 2, 2}, type: :f32, names: [:o, :i, :a, :b])
     )
     |> Nx.names()
   end},
  {"tensor_of_tensor_merge",
   fn -> Nx.tensor(Nx.tensor([[1, 2]], names: [:x, nil]), names: [nil, :y]) |> Nx.names() end},
  {"revectorize_target_names",
   fn -> Nx.revectorize(t, [v: 2], target_shape: {3}, target_names: [:r]) end},
  {"revectorize_no_names", fn -> Nx.revectorize(t, [v: 3], target_shape: {2}) |> Nx.names() end},
  {"vectorize_name_clash", fn -> Nx.vectorize(t, :y) end},
  {"compatible_names",
   fn ->
     {Nx.compatible?(t, Nx.rename(t, [:x, nil])), Nx.compatible?(t, Nx.rename(t, [:y, :x]))}
   end},
  {"tensor_of_tensor_drops", fn -> Nx.tensor(t) |> Nx.names() end},
  {"reduce_fun_named", fn -> Nx.reduce(t, 0, [axes: [:x], keep_axes: true], &Nx.add/2) end},
  {"window_reduce_named", fn -> Nx.window_reduce(t, 0, {1, 2}, &Nx.add/2) |> Nx.names() end},
  {"linspace_name",
   fn -> Nx.linspace(Nx.tensor([0, 1], names: [:s]), Nx.tensor([10, 20]), n: 3, name: :k) end},
  {"outer_matrix", fn -> Nx.outer(t, Nx.tensor([1, 2], names: [:z])) |> Nx.names() end},
  {"rename_vectorized", fn -> Nx.rename(Nx.vectorize(t, :v), [:v]) end}
]
