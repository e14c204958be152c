defmodule Nx.LinAlg do
  @moduledoc """
  Linear algebra, as `Nx.LinAlg` in Nx 0.7, computed by JAX on the worker.

  Every function accepts a matrix or a batch of matrices (leading axes are batch axes) and
  returns floating tensors: integer inputs give `{:f, 32}`. Functions that return several
  tensors (`qr/2`, `lu/1`, `svd/2`, `eigh/2`) return a tuple, built from one tuple-valued
  graph node (see PROTOCOL 4.1), so the decomposition is computed once.

  All of them are differentiable inside `defn` (JAX's rules).

  ## Examples

      iex> Nx.LinAlg.determinant(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]))
      #Nx.Tensor<
        f32
        -2.0
      >
  """

  alias Nx.Defn.{Compiler, Expr}

  defp float_type(tensors) do
    tensors |> Enum.map(& &1.type) |> Enum.reduce(&Nx.Type.merge/2) |> Nx.Type.to_floating()
  end

  defp apply_op(op, inputs, opts, type, shape) do
    out = Expr.template(type, shape)
    Expr.apply_op(op, inputs, opts, out)
  end

  # A tuple-valued node: traced inline inside defn, one worker call eagerly.
  defp tuple_op(op, inputs, opts, outs) do
    Compiler.jit_apply(
      fn inputs ->
        args = inputs |> Tuple.to_list() |> Enum.map(&Expr.to_expr/1)
        Expr.tuple(op, args, opts, outs)
      end,
      [List.to_tuple(inputs)],
      []
    )
  end

  defp batch_and_matrix(shape) do
    rank = tuple_size(shape)

    {shape |> Tuple.to_list() |> Enum.take(rank - 2), elem(shape, rank - 2),
     elem(shape, rank - 1)}
  end

  # b must be {..., n} or {..., n, m} (left side) / {..., m, n} (right side) for a {..., n, n}
  defp check_rhs!(a, b, left_side?, fun) do
    {batch, n, _} = batch_and_matrix(a.shape)
    dims = Tuple.to_list(b.shape)

    ok? =
      cond do
        length(dims) == length(batch) + 1 ->
          dims == batch ++ [n]

        length(dims) == length(batch) + 2 and left_side? ->
          Enum.take(dims, length(batch) + 1) == batch ++ [n]

        length(dims) == length(batch) + 2 ->
          Enum.take(dims, length(batch)) ++ [List.last(dims)] == batch ++ [n]

        true ->
          false
      end

    unless ok? do
      raise ArgumentError,
            "#{fun} expects b to have the shape #{inspect(List.to_tuple(batch ++ [n]))} or " <>
              "to be a matrix whose #{if left_side?, do: "rows", else: "columns"} match a " <>
              "(#{n}), got a of shape #{inspect(a.shape)} and b of shape #{inspect(b.shape)}"
    end
  end

  # Nx 0.7.2's wording for unknown options (see Nx's keyword!/2 use)
  defp keyword!(opts, keys), do: Nx.Defn.Kernel.keyword!(opts, keys)

  @doc """
  Solves `a . x = b` (or `x . a = b` with `left_side: false`) for a triangular `a`.

  ## Options

    * `:lower` - whether `a` is lower (default `true`) or upper triangular
    * `:left_side` - `true` (default) solves `a . x = b`, `false` solves `x . a = b`
    * `:transform_a` - `:none` (default) or `:transpose` (use `transpose(a)`)

  ## Examples

      iex> a = Nx.tensor([[3.0, 0.0], [2.0, 1.0]])
      iex> Nx.LinAlg.triangular_solve(a, Nx.tensor([6.0, 5.0]))
      #Nx.Tensor<
        f32[2]
        [2.0, 1.0]
      >

  """
  def triangular_solve(a, b, opts \\ []) do
    opts = keyword!(opts, lower: true, left_side: true, transform_a: :none)
    {a, b} = {Nx.to_tensor(a), Nx.to_tensor(b)}
    Nx.Shape.matrix!(a.shape, true, "triangular_solve")
    check_rhs!(a, b, opts[:left_side], "triangular_solve")

    unless opts[:transform_a] in [:none, :transpose] do
      raise ArgumentError,
            "triangular_solve expects :transform_a to be :none or :transpose, got: " <>
              inspect(opts[:transform_a])
    end

    for key <- [:lower, :left_side], not is_boolean(opts[key]) do
      raise ArgumentError, "triangular_solve expects #{key}: true or false"
    end

    wire = Map.new(opts)
    apply_op(:triangular_solve, [a, b], wire, float_type([a, b]), b.shape)
  end

  @doc """
  Solves `a . x = b` for a square, non-singular `a`; `b` is a vector or a matrix.

  ## Examples

      iex> Nx.LinAlg.solve(Nx.tensor([[1.0, 3.0], [2.0, 1.0]]), Nx.tensor([5.0, 5.0]))
      #Nx.Tensor<
        f32[2]
        [2.0, 1.0]
      >

  """
  def solve(a, b) do
    {a, b} = {Nx.to_tensor(a), Nx.to_tensor(b)}
    Nx.Shape.matrix!(a.shape, true, "solve")
    check_rhs!(a, b, true, "solve")
    apply_op(:solve, [a, b], %{}, float_type([a, b]), b.shape)
  end

  @doc """
  The inverse of a square, non-singular matrix.

  ## Examples

      iex> Nx.LinAlg.invert(Nx.tensor([[2.0, 0.0], [0.0, 4.0]]))
      #Nx.Tensor<
        f32[2][2]
        [
          [0.5, 0.0],
          [0.0, 0.25]
        ]
      >

  """
  def invert(a) do
    a = Nx.to_tensor(a)
    Nx.Shape.matrix!(a.shape, true, "invert")
    type = float_type([a])
    Compiler.jit_apply(fn a -> solve(a, Nx.eye(a.shape, type: type)) end, [a], [])
  end

  @doc """
  The Cholesky factor `l` (lower triangular, `l . transpose(l) = a`) of a symmetric
  positive-definite matrix.

  ## Examples

      iex> Nx.LinAlg.cholesky(Nx.tensor([[4.0, 2.0], [2.0, 5.0]]))
      #Nx.Tensor<
        f32[2][2]
        [
          [2.0, 0.0],
          [1.0, 2.0]
        ]
      >

  """
  def cholesky(a) do
    a = Nx.to_tensor(a)
    Nx.Shape.matrix!(a.shape, true, "cholesky")
    apply_op(:cholesky, [a], %{}, float_type([a]), a.shape)
  end

  @doc """
  The determinant of a square matrix (a scalar, or one per matrix of a batch).

  ## Examples

      iex> Nx.LinAlg.determinant(Nx.tensor([[[2, 0], [0, 3]], [[1, 2], [2, 4]]]))
      #Nx.Tensor<
        f32[2]
        [6.0, 0.0]
      >

  """
  def determinant(a) do
    a = Nx.to_tensor(a)
    Nx.Shape.matrix!(a.shape, true, "determinant")
    {batch, _, _} = batch_and_matrix(a.shape)
    apply_op(:determinant, [a], %{}, float_type([a]), List.to_tuple(batch))
  end

  @doc """
  The QR decomposition `{q, r}`: `q` has orthonormal columns, `r` is upper triangular and
  `q . r = a`. For `a` of shape `{m, n}` and `k = min(m, n)`, `mode: :reduced` (default)
  gives `q` `{m, k}` and `r` `{k, n}`; `mode: :complete` gives `q` `{m, m}` and `r` `{m, n}`.

  ## Examples

      iex> {q, r} = Nx.LinAlg.qr(Nx.tensor([[3.0, 0.0], [4.0, 5.0], [0.0, 0.0]]))
      iex> {q.shape, r.shape}
      {{3, 2}, {2, 2}}
      iex> Nx.all_close(Nx.dot(q, r), Nx.tensor([[3.0, 0.0], [4.0, 5.0], [0.0, 0.0]]), atol: 1.0e-5)
      #Nx.Tensor<
        u8
        1
      >

  """
  def qr(a, opts \\ []) do
    opts = keyword!(opts, mode: :reduced, eps: nil)
    a = Nx.to_tensor(a)
    Nx.Shape.matrix!(a.shape, false, "qr")
    {batch, m, n} = batch_and_matrix(a.shape)
    k = min(m, n)
    type = float_type([a])

    {q, r} =
      case opts[:mode] do
        :reduced ->
          {{m, k}, {k, n}}

        :complete ->
          {{m, m}, {m, n}}

        other ->
          raise ArgumentError,
                "qr expects :mode to be :reduced or :complete, got: #{inspect(other)}"
      end

    outs =
      for {rows, cols} <- [q, r], do: Expr.template(type, List.to_tuple(batch ++ [rows, cols]))

    tuple_op(:qr, [a], %{mode: opts[:mode]}, outs)
  end

  @doc """
  The LU decomposition with partial pivoting `{p, l, u}` of a square matrix: `p` a
  permutation matrix (`{:s, 64}`), `l` unit lower triangular, `u` upper triangular and
  `p . l . u = a`.

  ## Examples

      iex> {p, l, u} = Nx.LinAlg.lu(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]))
      iex> p
      #Nx.Tensor<
        s64[2][2]
        [
          [0, 1],
          [1, 0]
        ]
      >
      iex> Nx.all_close(p |> Nx.dot(l) |> Nx.dot(u), Nx.tensor([[1.0, 2.0], [3.0, 4.0]]))
      #Nx.Tensor<
        u8
        1
      >

  """
  def lu(a, opts \\ []) do
    keyword!(opts, eps: nil)
    a = Nx.to_tensor(a)
    Nx.Shape.matrix!(a.shape, true, "lu")
    type = float_type([a])

    outs = [
      Expr.template({:s, 64}, a.shape),
      Expr.template(type, a.shape),
      Expr.template(type, a.shape)
    ]

    tuple_op(:lu, [a], %{}, outs)
  end

  @doc """
  The eigenvalues and eigenvectors `{eigenvals, eigenvecs}` of a Hermitian (real symmetric)
  matrix, or of each matrix of a batch: `a . eigenvecs = eigenvecs * eigenvals` (column `i`
  of `eigenvecs` belongs to `eigenvals[i]`), with `eigenvecs` unitary. For `a` of shape
  `{..., n, n}`, `eigenvals` is `{..., n}` and `eigenvecs` `{..., n, n}`; both are floating
  (integers give `{:f, 32}`) and, for a complex `a`, complex (the eigenvalues are real numbers
  of that type), as in Nx 0.7.2.

  The order is Nx 0.7.2's, whose QR iteration leaves the eigenvalues in decreasing absolute
  value: so do these (equal magnitudes, such as `1` and `-1`, keep increasing order), except
  that a diagonal matrix keeps the order of its diagonal, with the identity as eigenvectors,
  as Nx returns it. An eigenvector is only defined up to its sign (its phase, when complex):
  each is scaled so that its entry of largest magnitude (the first of them, within the
  rounding of the type) is real and positive. Nx's signs follow its iteration and can differ.

  Only the Hermitian part `(a + adjoint(a)) / 2` is read: a matrix that is not Hermitian is
  not an error (Nx's binary backend raises for it). JAX's solver runs to convergence, so
  `:max_iter` and `:eps` are accepted and have no effect; half-precision inputs are
  computed in `{:f, 32}` and rounded back. The decomposition is differentiable inside `defn`
  (JAX's rule; the gradient of the eigenvectors is undefined where eigenvalues repeat).

  ## Options

    * `:max_iter` - accepted for compatibility (Nx's default `1_000`); no effect
    * `:eps` - accepted for compatibility (Nx's default `1.0e-4`); no effect

  ## Examples

      iex> {eigenvals, eigenvecs} = Nx.LinAlg.eigh(Nx.tensor([[1, 0], [0, 2]]))
      iex> eigenvals
      #Nx.Tensor<
        f32[2]
        [1.0, 2.0]
      >
      iex> eigenvecs
      #Nx.Tensor<
        f32[2][2]
        [
          [1.0, 0.0],
          [0.0, 1.0]
        ]
      >

      iex> {eigenvals, eigenvecs} = Nx.LinAlg.eigh(Nx.tensor([[2.0, 1.0], [1.0, 2.0]]))
      iex> eigenvals
      #Nx.Tensor<
        f32[2]
        [3.0, 1.0]
      >
      iex> eigenvecs
      #Nx.Tensor<
        f32[2][2]
        [
          [0.7071067690849304, 0.7071067690849304],
          [0.7071067690849304, -0.7071067690849304]
        ]
      >

      iex> a = Nx.tensor([[0, 1, 2], [1, 0, 2], [2, 2, 3]])
      iex> {eigenvals, eigenvecs} = Nx.LinAlg.eigh(a)
      iex> Nx.round(eigenvals)
      #Nx.Tensor<
        f32[3]
        [5.0, -1.0, -1.0]
      >
      iex> eigenvecs |> Nx.multiply(eigenvals) |> Nx.dot(Nx.transpose(eigenvecs)) |> Nx.all_close(a, atol: 1.0e-5)
      #Nx.Tensor<
        u8
        1
      >

      iex> t = Nx.tensor([[[2, 5], [5, 6]], [[1, 0], [0, 4]]]) |> Nx.vectorize(x: 2)
      iex> {eigenvals, _eigenvecs} = Nx.LinAlg.eigh(t)
      iex> Nx.round(eigenvals)
      #Nx.Tensor<
        vectorized[x: 2]
        f32[2]
        [
          [9.0, -1.0],
          [1.0, 4.0]
        ]
      >

  ## Error cases

      iex> Nx.LinAlg.eigh(Nx.tensor([[1, 2, 3], [4, 5, 6]]))
      ** (ArgumentError) tensor must be a square matrix or a batch of square matrices, got shape: {2, 3}

  """
  def eigh(a, opts \\ []) do
    keyword!(opts, max_iter: 1_000, eps: 1.0e-4)
    a = Nx.to_tensor(a)
    {vals_shape, vecs_shape} = Nx.Shape.eigh(a.shape)
    type = float_type([a])
    outs = [Expr.template(type, vals_shape), Expr.template(type, vecs_shape)]
    tuple_op(:eigh, [a], %{}, outs)
  end

  @doc """
  The singular value decomposition `{u, s, vt}`: `u . make_diagonal(s) . vt = a`, singular
  values `s` in decreasing order. For `a` of shape `{m, n}` and `k = min(m, n)`:
  `full_matrices?: true` (default) gives `u` `{m, m}` and `vt` `{n, n}`, `false` gives
  `u` `{m, k}` and `vt` `{k, n}`; `s` is `{k}`.

  ## Examples

      iex> {_u, s, _vt} = Nx.LinAlg.svd(Nx.tensor([[3.0, 0.0], [0.0, -4.0]]))
      iex> s
      #Nx.Tensor<
        f32[2]
        [4.0, 3.0]
      >

  """
  def svd(a, opts \\ []) do
    opts = keyword!(opts, max_iter: nil, full_matrices?: true)
    a = Nx.to_tensor(a)
    Nx.Shape.matrix!(a.shape, false, "svd")
    {batch, m, n} = batch_and_matrix(a.shape)
    k = min(m, n)
    type = float_type([a])
    full? = opts[:full_matrices?]
    {u_cols, vt_rows} = if full?, do: {m, n}, else: {k, k}

    outs = [
      Expr.template(type, List.to_tuple(batch ++ [m, u_cols])),
      Expr.template(type, List.to_tuple(batch ++ [k])),
      Expr.template(type, List.to_tuple(batch ++ [vt_rows, n]))
    ]

    tuple_op(:svd, [a], %{full_matrices: full? == true}, outs)
  end
end
