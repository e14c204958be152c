defmodule NxJax.Ops do
  @moduledoc """
  The ops of the wire graph (docs/PROTOCOL.md section 4), declared by family: the op
  registry of the Elixir side. Each entry names its ops, their number of inputs (an integer,
  or `{min, :infinity}`) and the options the worker reads.

  `NxJax` refuses a graph with a node whose op is not here, or whose number of inputs is not
  the op's (`check_graph!/1`), before anything is sent. The worker's registry
  (`py_backend/registry.py`, collected from `py_backend/ops/<family>.py`) declares the same
  ops in the same families, with their checks and lowering; a test
  (`test_elixir/op_registry_test.exs`) holds this list, the worker's and PROTOCOL.md's tables
  equal.

  ## Examples

      iex> NxJax.Ops.fetch(:sum)
      {:ok, %{family: :reductions, arity: 1, opts: [:axes, :keep_axes]}}
      iex> NxJax.Ops.fetch(:concatenate)
      {:ok, %{family: :shape, arity: {1, :infinity}, opts: [:axis]}}
      iex> NxJax.Ops.fetch(:no_such_op)
      :error
  """

  @families [
    leaves: [
      {[:parameter], 0, [:index]},
      {[:constant], 0, [:value]},
      {[:tensor], 0, [:data]},
      {[:iota], 0, [:axis]},
      {[:cotangent], 0, []}
    ],
    elementwise: [
      # computed in the output type
      {~w(exp expm1 log log1p sqrt rsqrt sin cos tan tanh sigmoid negate)a, 1, []},
      {~w(cosh sinh acos asin atan acosh asinh atanh cbrt erf erfc erf_inv)a, 1, []},
      {~w(conjugate sign floor ceil round)a, 1, []},
      {~w(bitwise_not population_count count_leading_zeros)a, 1, []},
      {~w(add subtract multiply divide pow max min remainder atan2)a, 2, []},
      {~w(quotient bitwise_and bitwise_or bitwise_xor left_shift right_shift)a, 2, []},
      # computed on the inputs as they are
      {~w(abs real imag is_nan is_infinity logical_not)a, 1, []},
      {~w(logical_and logical_or logical_xor)a, 2, []},
      {~w(equal not_equal less less_equal greater greater_equal)a, 2, [:operand_type]},
      {~w(select clip)a, 3, []},
      {~w(as_type bitcast)a, 1, []}
    ],
    reductions: [
      {~w(sum product reduce_max reduce_min mean all any)a, 1, [:axes, :keep_axes]},
      {~w(argmax argmin)a, 1, [:axis, :keep_axis, :tie_break]},
      {~w(cumulative_sum cumulative_product cumulative_max cumulative_min)a, 1,
       [:axis, :reverse]},
      {~w(window_sum window_product window_max window_min)a, 1,
       [:padding, :strides, :window_dilations, :window_dimensions]},
      {~w(window_scatter_max window_scatter_min)a, 3, [:padding, :strides, :window_dimensions]}
    ],
    shape: [
      {[:reshape], 1, []},
      {~w(transpose broadcast)a, 1, [:axes]},
      {[:slice], 1, [:lengths, :start_indices, :strides]},
      {[:concatenate], {1, :infinity}, [:axis]},
      {[:pad], 2, [:padding_config]},
      {[:reverse], 1, [:axes]}
    ],
    indexing: [
      {[:dynamic_slice], {1, :infinity}, [:lengths]},
      {[:put_slice], {2, :infinity}, []},
      {[:gather], 2, [:axes]},
      {~w(indexed_add indexed_put)a, 3, [:axes]},
      {~w(take take_along_axis)a, 2, [:axis]},
      {~w(sort argsort)a, 1, [:axis, :direction]},
      {[:top_k], 1, [:k]},
      {[:elem], 1, [:index]}
    ],
    linalg: [
      {[:dot], 2, [:batch_axes, :contract_axes]},
      {[:conv], 2,
       [
         :batch_group_size,
         :feature_group_size,
         :input_dilation,
         :input_permutation,
         :kernel_dilation,
         :kernel_permutation,
         :output_permutation,
         :padding,
         :strides
       ]},
      {[:triangular_solve], 2, [:left_side, :lower, :transform_a]},
      {[:solve], 2, []},
      {~w(cholesky determinant)a, 1, []},
      {[:qr], 1, [:mode]},
      {[:lu], 1, []},
      {[:svd], 1, [:full_matrices, :max_iter]},
      {[:eigh], 1, [:eps, :max_iter]},
      {~w(fft ifft)a, 1, [:length]},
      {~w(fft2 ifft2)a, 1, [:axes, :lengths]}
    ],
    grad: [
      {[:grad], {2, :infinity}, []},
      {[:stop_grad], 1, []},
      {[:custom_grad], {1, :infinity}, [:cotangents, :grads, :tuple, :wrt]},
      {[:metadata], 1, [:keys]},
      {[:checkpoint_name], 1, [:name]},
      # JAX's differentiation beyond Nx (NxJax.Autodiff)
      {[:jvp], {3, :infinity}, []},
      {~w(jacfwd jacrev hessian)a, {2, :infinity}, [:batch]},
      {[:custom_jvp], {2, :infinity}, [:jvp, :primals]}
    ],
    control_flow: [
      {[:cond], {1, :infinity}, [:branches]},
      {[:while], {1, :infinity}, [:body, :condition, :max_iterations]},
      {[:range_loop], {1, :infinity}, [:body, :count, :first, :step]},
      {[:reduce], {2, :infinity}, [:axes, :keep_axes, :reducer]},
      {[:window_reduce], {2, :infinity},
       [:padding, :reducer, :strides, :window_dilations, :window_dimensions]},
      {[:hook], {1, :infinity}, [:index]},
      {[:attach_token], {2, :infinity}, []},
      {[:custom_root], {1, :infinity}, [:f, :solve, :tangent_solve]},
      {[:custom_linear_solve], {1, :infinity}, [:matvec, :solve, :symmetric, :transpose_solve]},
      {[:linear_map], 1, []},
      {[:checkpoint], {0, :infinity}, [:fun, :policy, :prevent_cse]}
    ]
  ]

  @table for {family, groups} <- @families,
             {names, arity, opts} <- groups,
             name <- names,
             do: {name, %{family: family, arity: arity, opts: opts}}

  @index Map.new(@table)
  if map_size(@index) != length(@table), do: raise("an op is declared twice in NxJax.Ops")

  @doc "The families, in order, each with its ops in order."
  @spec families() :: [{atom, [atom]}]
  def families do
    for {family, groups} <- @families,
        do: {family, for({names, _, _} <- groups, n <- names, do: n)}
  end

  @doc "Every op, in the order of `families/0`."
  @spec ops() :: [atom]
  def ops, do: for({name, _} <- @table, do: name)

  @doc "The entry of `op`: its family, arity and options."
  @spec fetch(atom) :: {:ok, map} | :error
  def fetch(op), do: Map.fetch(@index, op)

  @doc """
  Raises `ArgumentError` unless `op` is an op of the wire graph that takes `inputs` inputs.
  """
  @spec check!(atom, non_neg_integer) :: :ok
  def check!(op, inputs) do
    case @index do
      %{^op => %{arity: arity}} ->
        if takes?(arity, inputs) do
          :ok
        else
          raise ArgumentError,
                "nx_jax: graph op #{inspect(op)} takes #{describe(arity)} inputs, got #{inputs}"
        end

      %{} ->
        raise ArgumentError,
              "nx_jax: #{inspect(op)} is not an op of the wire graph, so the worker " <>
                "cannot run it (NxJax.Ops.ops/0 lists those it runs)"
    end
  end

  @doc """
  `check!/2` on every node of a wire graph, its sub-graphs included.
  """
  @spec check_graph!(tuple) :: :ok
  def check_graph!({:nx_jax_graph, _version, nodes, _outputs}) do
    Enum.each(nodes, fn {_id, op, inputs, opts, _out} ->
      check!(op, length(inputs))
      Enum.each(opts, fn {_key, value} -> check_subgraphs!(value) end)
    end)
  end

  defp check_subgraphs!({:nx_jax_graph, _, _, _} = graph), do: check_graph!(graph)

  defp check_subgraphs!([{:nx_jax_graph, _, _, _} | _] = graphs),
    do: Enum.each(graphs, &check_graph!/1)

  defp check_subgraphs!(_value), do: :ok

  defp takes?({min, :infinity}, n), do: n >= min
  defp takes?(arity, n), do: n == arity

  defp describe({min, :infinity}), do: "at least #{min}"
  defp describe(arity), do: "#{arity}"
end
