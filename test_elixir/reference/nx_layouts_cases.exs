# Cases for nx_0.7.2_layouts.tsv (see nx_layouts_reference.exs): convolutions in other
# layouts than {batch, channels, spatial...} (the permutation options, as network libraries
# use them, with groups, strides, dilations and padding, and their gradients) and the
# element window_scatter_max/min selects among tied ones.
#
# Evaluating this file gives a list of {name, code} string pairs; each code is an Elixir
# expression on the public Nx 0.7.2 API whose value is a tensor or a tuple of tensors.
# The data are small integers (iota), so every sum is exact in f32 and both sides must
# agree bit for bit.

conv = fn input, kernel, opts -> "Nx.conv(#{input}, #{kernel}, #{opts})" end

# grad of sum(conv(x, k) * weights) with respect to the input and to the kernel
conv_grads = fn input, kernel, opts ->
  """
  x = #{input}; k = #{kernel}
  w = Nx.conv(x, k, #{opts}) |> then(&Nx.iota(Nx.shape(&1), type: :f32))
  Nx.Defn.jit(fn x, k, w ->
    loss = fn x, k -> Nx.conv(x, k, #{opts}) |> Nx.multiply(w) |> Nx.sum() end
    {Nx.Defn.grad(x, &loss.(&1, k)), Nx.Defn.grad(k, &loss.(x, &1))}
  end).(x, k, w)
  """
end

nhwc = "input_permutation: [0, 3, 1, 2], output_permutation: [0, 3, 1, 2]"
# a kernel {height, width, in, out} (TensorFlow's and Axon's layout)
hwio = "kernel_permutation: [3, 2, 0, 1]"

layouts = [
  {"nhwc", "Nx.iota({1, 4, 4, 2}, type: :f32)", "Nx.iota({3, 2, 2, 2}, type: :f32)", nhwc},
  {"nhwc_9x9", "Nx.iota({1, 9, 9, 2}, type: :f32)", "Nx.iota({3, 2, 2, 2}, type: :f32)", nhwc},
  {"nhwc_hwio", "Nx.iota({2, 5, 4, 3}, type: :f32)", "Nx.iota({2, 2, 3, 4}, type: :f32)",
   "#{nhwc}, #{hwio}"},
  {"nhwc_strides_same_dilated", "Nx.iota({1, 7, 6, 2}, type: :f32)",
   "Nx.iota({2, 2, 3, 3}, type: :f32)",
   "#{nhwc}, strides: [2, 1], padding: :same, kernel_dilation: [1, 2]"},
  {"nhwc_feature_groups", "Nx.iota({1, 5, 5, 4}, type: :f32)",
   "Nx.iota({2, 2, 2, 6}, type: :f32)", "#{nhwc}, #{hwio}, feature_group_size: 2"},
  {"nhwc_depthwise", "Nx.iota({2, 4, 5, 3}, type: :f32)", "Nx.iota({2, 2, 1, 6}, type: :f32)",
   "#{nhwc}, #{hwio}, feature_group_size: 3, padding: [{1, 0}, {0, 1}]"},
  {"nhwc_batch_groups", "Nx.iota({4, 4, 4, 2}, type: :f32)", "Nx.iota({4, 2, 2, 2}, type: :f32)",
   "#{nhwc}, batch_group_size: 2"},
  # a transposed convolution as network libraries build it: the input dilated by the
  # strides, padded by kernel - 1 - padding, the kernel flipped by the caller
  {"nhwc_transposed", "Nx.iota({1, 3, 3, 2}, type: :f32)",
   "Nx.iota({3, 3, 2, 2}, type: :f32) |> Nx.reverse(axes: [0, 1])",
   "#{nhwc}, #{hwio}, input_dilation: [2, 2], padding: [{2, 2}, {2, 2}]"},
  {"nwc_1d_strided", "Nx.iota({2, 9, 3}, type: :f32)", "Nx.iota({3, 3, 4}, type: :f32)",
   "input_permutation: [0, 2, 1], kernel_permutation: [2, 1, 0], " <>
     "output_permutation: [0, 2, 1], strides: 2, input_dilation: 2, padding: [{1, 2}]"},
  # the output in yet another layout: {width, batch, height, channels}
  {"nhwc_out_wnhc", "Nx.iota({2, 4, 3, 2}, type: :f32)", "Nx.iota({3, 2, 2, 2}, type: :f32)",
   "input_permutation: [0, 3, 1, 2], output_permutation: [1, 3, 2, 0]"},
  {"ndhwc_3d", "Nx.iota({1, 3, 4, 3, 2}, type: :f32)", "Nx.iota({2, 2, 2, 2, 2}, type: :f32)",
   "input_permutation: [0, 4, 1, 2, 3], output_permutation: [0, 4, 1, 2, 3]"}
]

named = [
  {"conv_names_output_permutation",
   """
   t = Nx.iota({1, 4, 4, 2}, type: :f32, names: [:batch, :height, :width, :channels])
   Nx.conv(t, Nx.iota({3, 2, 2, 2}, type: :f32),
     input_permutation: [:batch, :channels, :height, :width],
     output_permutation: [:batch, :channels, :height, :width])
   """},
  {"conv_names_identity_output",
   """
   t = Nx.iota({1, 4, 4, 2}, type: :f32, names: [:batch, :height, :width, :channels])
   Nx.conv(t, Nx.iota({3, 2, 2, 2}, type: :f32),
     input_permutation: [:batch, :channels, :height, :width],
     output_permutation: [:batch, :height, :width, :channels])
   """}
]

scatter = fn op, t, source, init, window, opts ->
  "Nx.#{op}(#{t}, #{source}, #{init}, #{window}, #{opts})"
end

scatters =
  for op <- ["window_scatter_max", "window_scatter_min"],
      {name, t, source, init, window, opts} <- [
        {"ties", "Nx.tensor([[2, 2, 5, 5]])", "Nx.tensor([[1, 7]])", 0, "{1, 2}",
         "strides: [1, 2]"},
        {"ties_overlapping", "Nx.tensor([[1, 2, 2, 1, 2]])", "Nx.tensor([[1, 10, 100, 1000]])", 0,
         "{1, 2}", "strides: [1, 1]"},
        {"all_equal_2d", "Nx.broadcast(3, {4, 4})", "Nx.tensor([[1, 2], [3, 4]])", -1, "{3, 3}",
         "strides: [1, 1]"},
        {"float_ties", "Nx.tensor([[0.5, 0.25, 0.5], [0.25, 0.5, 0.25]])",
         "Nx.tensor([[1.5, 2.5]])", 0.5, "{2, 2}", "strides: [1, 1]"},
        {"signed_zeros", "Nx.tensor([[-0.0, 0.0, 1.0], [1.0, 0.0, -0.0]])",
         "Nx.tensor([[5.0, 6.0]])", 0, "{2, 2}", "strides: [1, 1]"},
        {"nan_first", "Nx.tensor([[:nan, 1.0, 1.0], [1.0, 1.0, 0.5]])", "Nx.tensor([[5.0, 6.0]])",
         0, "{2, 2}", "strides: [1, 1]"},
        {"nan_later", "Nx.tensor([[1.0, :nan, 1.0], [1.0, 1.0, 0.5]])", "Nx.tensor([[5.0, 6.0]])",
         0, "{2, 2}", "strides: [1, 1]"},
        {"f32_steps", "Nx.tensor([[0.3, 0.3, 0.1]])", "Nx.tensor([[0.1, 0.7]])", 0.1, "{1, 2}",
         "strides: [1, 1]"},
        {"f64_compared_as_f32", "Nx.tensor([[1.0000000000001, 1.0]], type: :f64)",
         "Nx.tensor([[5.0]])", 0.0, "{1, 2}", "strides: [1, 1]"},
        # padding after the tensor that no window selects (Nx's binary backend can select
        # padding: it holds init_value there)
        {"padded_high", "Nx.tensor([[5, 1, 1, 1, 4]])", "Nx.tensor([[1, 7, 9]])",
         if(op == "window_scatter_max", do: 0, else: 100), "{1, 2}",
         "strides: [1, 2], padding: :same"},
        {"doc_example", "Nx.tensor([[7, 2, 5, 3], [3, 8, 9, 3], [1, 5, 7, 5], [0, 6, 2, 8]])",
         "Nx.tensor([[2, 6], [3, 1]])", 0, "{2, 2}", "strides: [2, 2]"}
      ],
      do: {"#{op}_#{name}", scatter.(op, t, source, init, window, opts)}

# the gradient of window_max / window_min is window_scatter_max / _min (Nx's rule): ties too
window_grads =
  for op <- ["window_max", "window_min"],
      {name, t, window, opts} <- [
        {"ties", "Nx.tensor([[2.0, 2.0, 5.0, 5.0]])", "{1, 2}", "strides: [1, 2]"},
        {"relu_zeros", "Nx.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])", "{2, 2}",
         "strides: [1, 1]"}
      ],
      do:
        {"grad_#{op}_#{name}",
         "Nx.Defn.grad(#{t}, fn t -> Nx.#{op}(t, #{window}, #{opts}) |> Nx.multiply(Nx.iota(Nx.shape(Nx.#{op}(t, #{window}, #{opts})), type: :f32) |> Nx.add(1)) |> Nx.sum() end)"}

Enum.flat_map(layouts, fn {name, input, kernel, opts} ->
  [
    {"conv_#{name}", conv.(input, kernel, opts)},
    {"grad_conv_#{name}", conv_grads.(input, kernel, opts)}
  ]
end) ++ named ++ scatters ++ window_grads
