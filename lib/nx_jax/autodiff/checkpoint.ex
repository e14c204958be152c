defmodule NxJax.Autodiff.Checkpoint do
  @moduledoc """
  Gradient checkpointing inside `defn`: `checkpoint/3` (`jax.checkpoint`, also called
  `jax.remat`) and `checkpoint_name/2` (`jax.ad_checkpoint.checkpoint_name`).

  A checkpointed function gives the same values and the same gradients as the function
  itself; what changes is what the backward pass keeps from the forward pass. Without
  checkpointing every intermediate value a gradient needs is saved; inside `checkpoint/3`
  only what the policy saves is kept, and the rest is computed again, from the function's
  inputs, when the backward pass needs it: memory for compute. Whether the compiled program
  really holds less at once is up to XLA's scheduler on each platform (see
  docs/CHECKPOINTING.md and docs/BENCHMARKS.md, "Checkpointing: what it saves, per
  platform").

  The function is traced once into a sub-graph of a `:checkpoint` node (as the branches of
  `if` and the bodies of `while` are, `Nx.Defn.ControlFlow`): its parameters are the leaves
  of the arguments, then the values it closes over (captures); gradients flow to both
  (docs/PROTOCOL.md 4.3). Vectorized values (`Nx.vectorize/2`) are checkpointed whole: the
  node takes them devectorized and its results have the vectorized axes the function gives
  them, so the checkpoint of a vectorized function is the vectorized checkpoint, as
  `jax.checkpoint` of a `jax.vmap`.
  """

  alias Nx.Defn.{Composite, ControlFlow, Expr}
  alias NxJax.Autodiff.Checks

  @doc """
  The names of the policies `checkpoint/3` takes as atoms, with what each saves.

      iex> NxJax.Autodiff.Checkpoint.policies() |> Keyword.keys()
      [:everything_saveable, :nothing_saveable, :dots_saveable, :dots_with_no_batch_dims_saveable]
  """
  @spec policies() :: keyword(String.t())
  defdelegate policies, to: Checks

  @doc """
  `fun` applied to `args`, checkpointed: the same values and gradients, with only what
  `:policy` saves kept from the forward pass for the backward pass (the rest is recomputed).

  `args` is a tensor, a number or a tuple (or map) of them, passed to `fun` (of arity 1) as
  it is; or a list of them, passed as `fun`'s arguments (`checkpoint(&layer/2, [x, w])`).
  `fun` returns a tensor, a number or a container of them, and `checkpoint/3` returns the
  same container.

  ## Options

    * `:policy` - what is saved (`jax.checkpoint_policies`): `nil` (the default, JAX's:
      nothing but the inputs), one of the atoms of `policies/0`, `{:save_only, names}`
      (only the values named with `checkpoint_name/2` in `names`: `save_only_these_names`)
      or `{:save_anything_except, names}` (everything but those: `save_any_names_but_these`);
      `names` is a list of atoms or strings
    * `:prevent_cse` - when true (the default, as JAX's), the recomputation is guarded so
      that XLA cannot merge it with the forward computation (which would save everything
      again); JAX suggests `false` inside a loop body (`while`), where it is not needed

  ## Examples

      iex> loss = fn x -> Nx.sum(NxJax.Autodiff.Checkpoint.checkpoint(&Nx.sin/1, x)) end
      iex> Nx.Defn.grad(Nx.tensor([0.0, 1.0]), loss)
      #Nx.Tensor<
        f32[2]
        [1.0, 0.5403022766113281]
      >

  Inside `defn`, with `import NxJax.Autodiff.Checkpoint`:

      defn loss(w1, w2, x) do
        h = checkpoint(fn {x, w1} -> Nx.tanh(Nx.dot(x, w1)) end, {x, w1}, policy: :dots_saveable)
        Nx.sum(Nx.tanh(Nx.dot(h, w2)))
      end
  """
  def checkpoint(fun, args, opts \\ [])

  def checkpoint(fun, args, opts) do
    {policy, prevent_cse} = Checks.checkpoint_options!(opts)
    {apply_fun, containers} = Checks.checkpoint_arguments!(fun, args)

    leaves =
      containers
      |> Composite.flatten_list()
      |> Enum.map(&value!(&1, "checkpoint/3", "an argument"))

    {{params, result}, scope} =
      ControlFlow.trace_on_parameters(leaves, &apply_fun.(fill_arguments(containers, &1)))

    outputs = result!(result)
    captures = ControlFlow.captures(outputs, scope)

    opts = %{
      fun: {:subgraph, outputs, params ++ captures},
      policy: policy,
      prevent_cse: prevent_cse
    }

    inputs = Enum.map(leaves ++ captures, &ControlFlow.node_input/1)
    outs = Expr.tuple(:checkpoint, inputs, opts, Enum.map(outputs, &Expr.template_of/1))

    Composite.fill(result, Tuple.to_list(outs))
  end

  @doc """
  `tensor` named `name` (an atom or a string) for the policies of `checkpoint/3`
  (`{:save_only, names}`, `{:save_anything_except, names}`): the identity for values and
  gradients, here and outside any `checkpoint/3`.

  ## Examples

      iex> NxJax.Autodiff.Checkpoint.checkpoint_name(Nx.tensor([1.0, 2.0]), :h)
      #Nx.Tensor<
        f32[2]
        [1.0, 2.0]
      >
  """
  def checkpoint_name(tensor, name) do
    name = Checks.checkpoint_name!(name, "checkpoint_name/2")

    if Expr.expr?(tensor) or Expr.tracing?() do
      tensor = value!(tensor, "checkpoint_name/2", "the tensor")
      Expr.expr(:checkpoint_name, [tensor], %{name: name}, Expr.template_of(tensor))
    else
      # a concrete value outside defn: the identity, with no graph to name anything in
      value!(tensor, "checkpoint_name/2", "the tensor")
      tensor
    end
  end

  ## Values

  defp fill_arguments(containers, params) do
    {filled, []} =
      Enum.map_reduce(containers, params, fn container, params ->
        size = length(Composite.flatten_list([container]))
        {mine, rest} = Enum.split(params, size)
        {Composite.fill(container, mine), rest}
      end)

    filled
  end

  # a leaf of the arguments or of the result (`what`), as an expression
  defp value!(%Nx.Tensor{} = tensor, _fun, _what), do: Expr.to_expr(tensor)

  defp value!(number, _fun, _what) when is_number(number), do: Expr.to_expr(number)
  defp value!(%Complex{} = number, _fun, _what), do: Expr.to_expr(Nx.tensor(number))

  defp value!(other, fun, what) do
    raise ArgumentError,
          "#{fun} expects #{what} to be a tensor or a number (or a tuple or map of them), " <>
            "got: #{inspect(other)}"
  end

  defp result!(result) do
    case Composite.flatten_list([result]) do
      [] ->
        raise ArgumentError,
              "the function given to checkpoint/3 must return a tensor, a number or a " <>
                "container of them, got: #{inspect(result)}"

      leaves ->
        Enum.map(leaves, &value!(&1, "checkpoint/3", "the result of its function"))
    end
  end
end
