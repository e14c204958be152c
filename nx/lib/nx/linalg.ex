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

    # Nx 0.7.2's messages
    cond do
      ok? ->
        :ok

      fun == "solve" ->
        raise ArgumentError,
              "`b` tensor has incompatible dimensions, expected " <>
                "#{inspect(if batch == [], do: {n, n}, else: List.to_tuple(batch ++ [n, "m"]))} " <>
                "or #{inspect(List.to_tuple(batch ++ [n]))}, got: #{inspect(b.shape)}"

      true ->
        raise ArgumentError, "incompatible dimensions for a and b on triangular solve"
    end
  end

  # Nx 0.7.2's wording for unknown options (see Nx's keyword!/2 use)
  defp keyword!(opts, keys), do: Nx.Defn.Kernel.keyword!(opts, keys)

  @doc """
  Solves `a . x = b` (or `x . a = b` with `left_side: false`) for a triangular `a`. A zero on
  the diagonal of a concrete `a` raises, as in Nx 0.7.2 (inside `defn` the values are not
  known: the result then holds infinities or NaN).

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

    # Nx 0.7.2's checks, in its order: the option, then the shapes
    case opts[:transform_a] do
      transform when transform in [:none, :transpose] ->
        :ok

      :conjugate ->
        raise ArgumentError, "complex numbers not supported yet"

      other ->
        raise ArgumentError,
              "invalid value for :transform_a option, expected :none, :transpose, or " <>
                ":conjugate, got: #{inspect(other)}"
    end

    Nx.Shape.matrix!(a.shape, true, "triangular_solve")
    check_rhs!(a, b, opts[:left_side], "triangular_solve")

    for key <- [:lower, :left_side], not is_boolean(opts[key]) do
      raise ArgumentError, "triangular_solve expects #{key}: true or false"
    end

    nonzero_diagonal!(a)
    wire = Map.new(opts)
    apply_op(:triangular_solve, [a, b], wire, float_type([a, b]), b.shape)
  end

  # Nx 0.7.2 divides by each diagonal entry of `a` and raises when one is zero: the same
  # check on a concrete `a` (inside defn its values are not known, and a zero entry gives
  # infinities or NaN, as XLA's solver does)
  defp nonzero_diagonal!(%Nx.Tensor{data: %Expr{}}), do: :ok

  defp nonzero_diagonal!(%Nx.Tensor{type: {kind, bits}, shape: shape} = a) do
    n = elem(shape, tuple_size(shape) - 1)
    bytes = div(bits, 8)
    binary = Nx.to_binary(a)
    matrices = if n == 0, do: 0, else: div(byte_size(binary), n * n * bytes)
    part_bits = if kind == :c, do: div(bits, 2), else: bits

    singular? =
      Enum.any?(0..(matrices * n - 1)//1, fn k ->
        # the k-th diagonal entry counted through the batch: matrix div(k, n), row rem(k, n)
        offset = (div(k, n) * n * n + rem(k, n) * (n + 1)) * bytes
        zero_entry?(binary_part(binary, offset, bytes), kind, part_bits)
      end)

    if singular?, do: raise(ArgumentError, "can't solve for singular matrix")
    :ok
  end

  defp zero_entry?(entry, kind, _bits) when kind in [:s, :u],
    do: entry == <<0::size(byte_size(entry) * 8)>>

  # (floating parts: zero when every bit but the sign is)
  defp zero_entry?(entry, _kind, bits) do
    mask = Bitwise.bsl(1, bits - 1) - 1
    for(<<part::size(bits)-native <- entry>>, do: Bitwise.band(part, mask) == 0) |> Enum.all?()
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
                "invalid :mode received. Expected one of [:reduced, :complete], received: " <>
                  inspect(other)
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

  The values are those of Nx 0.7.2's binary backend, to the last bits but for rounding
  (numerics mode `:nx`, the default): Householder reduction to Hessenberg form, then QR
  iterations in double, until no entry of the eigenvectors moves by more than `:eps` or
  `:max_iter` iterations have run, so the order and signs are those the iteration leaves
  (mostly decreasing absolute value; a diagonal matrix keeps its order with the identity).
  With Nx's default `eps: 1.0e-4` the iteration stops early: `a . v - v * w` is typically
  1e-3 to 1e-2 of `a`'s entries, as in Nx (`[[2.0, 1.0], [1.0, 2.0]]` gives
  `[2.99997, 1.00003]`); a smaller `:eps` (down to about `1.0e-8`) and a larger
  `:max_iter` converge further. Where Nx's iteration yields no decomposition (for
  `[[0, 1], [1, 0]]`, whose eigenvalues `1` and `-1` have one magnitude, it never converges
  and Nx returns eigenvalues `0` and `0`), LAPACK's decomposition is returned instead, in
  decreasing absolute value (equal magnitudes in increasing order) with each eigenvector's
  entry of largest magnitude real and positive; numerics mode `:native` returns that one
  always, to machine precision.

  Only the Hermitian part `(a + adjoint(a)) / 2` is read: a matrix that is not Hermitian is
  not an error (Nx's binary backend raises for it). Every type is computed in double (complex
  double) and rounded once, as Nx does. The decomposition is differentiable inside `defn`:
  the gradient is that of LAPACK's exact decomposition, for the pairs returned (JAX's rule;
  the gradient of the eigenvectors is undefined where eigenvalues repeat).

  ## Options

    * `:max_iter` - the most QR iterations (default `1_000`, Nx's)
    * `:eps` - the convergence tolerance, and the magnitude under which entries are set to
      0 (default `1.0e-4`, Nx's)

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
        [2.9999661445617676, 1.0000338554382324]
      >
      iex> eigenvecs
      #Nx.Tensor<
        f32[2][2]
        [
          [0.7100106477737427, 0.7041909098625183],
          [0.7041909098625183, -0.7100106477737427]
        ]
      >

      iex> a = Nx.tensor([[0, 1, 2], [1, 0, 2], [2, 2, 3]])
      iex> {eigenvals, eigenvecs} = Nx.LinAlg.eigh(a)
      iex> Nx.round(eigenvals)
      #Nx.Tensor<
        f32[3]
        [5.0, -1.0, -1.0]
      >
      iex> eigenvecs |> Nx.multiply(eigenvals) |> Nx.dot(Nx.transpose(eigenvecs)) |> Nx.all_close(a, atol: 1.0e-2)
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
    opts = keyword!(opts, max_iter: 1_000, eps: 1.0e-4)
    a = Nx.to_tensor(a)
    {vals_shape, vecs_shape} = Nx.Shape.eigh(a.shape)
    type = float_type([a])
    outs = [Expr.template(type, vals_shape), Expr.template(type, vecs_shape)]
    tuple_op(:eigh, [a], %{eps: opts[:eps] / 1, max_iter: opts[:max_iter]}, outs)
  end

  @doc """
  The singular value decomposition `{u, s, vt}`: `u . make_diagonal(s) . vt = a`, singular
  values `s` in decreasing order. For `a` of shape `{m, n}` and `k = min(m, n)`:
  `full_matrices?: true` (default) gives `u` `{m, m}` and `vt` `{n, n}`, `false` gives
  `u` `{m, k}` and `vt` `{k, n}`; `s` is `{k}`. Complex inputs raise (as in Nx 0.7.2, which
  has not implemented them).

  In numerics mode `:nx` (the default of this project's tests) the values are those of Nx
  0.7.2's own algorithm, but for the rounding of its steps: the QDWH polar decomposition
  `a = u h`, then Nx's `eigh/2` of `h` with its default `eps: 1.0e-4`, whose early stop
  leaves the factors about 1e-4 from the exact decomposition (`u . diag(s) . vt` within about
  1e-3 of `a`), as in Nx; the signs of the singular vectors are the ones Nx's steps leave.
  Numerics mode `:native` gives LAPACK's decomposition, to machine precision. Inside `defn`
  the gradient is that of the exact decomposition (with `full_matrices?: true` only for
  square matrices).

  ## Options

    * `:max_iter` - the most steps of the polar iteration, and of the QR iteration of
      `eigh/2` (default `100`, Nx's)
    * `:full_matrices?` - whether `u` and `vt` are square (default `true`)

  ## Examples

      iex> {u, s, vt} = Nx.LinAlg.svd(Nx.tensor([[3.0, 0.0], [0.0, -4.0]]))
      iex> s
      #Nx.Tensor<
        f32[2]
        [4.0, 3.0]
      >
      iex> u
      #Nx.Tensor<
        f32[2][2]
        [
          [0.0, 1.0],
          [-1.0, 0.0]
        ]
      >
      iex> vt
      #Nx.Tensor<
        f32[2][2]
        [
          [0.0, 1.0],
          [1.0, 0.0]
        ]
      >

  """
  def svd(a, opts \\ []) do
    opts = keyword!(opts, max_iter: 100, full_matrices?: true)
    a = Nx.to_tensor(a)

    if Nx.Type.complex?(a.type) do
      raise ArgumentError, "Nx.LinAlg.svd/2 is not yet implemented for complex inputs"
    end

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

    tuple_op(:svd, [a], %{full_matrices: full? == true, max_iter: opts[:max_iter]}, outs)
  end

  ## Built from the decompositions above (as Nx 0.7.2 builds them)

  @doc """
  The conjugate transpose of a matrix, or of each matrix of a batch (the last two axes
  swapped; complex entries conjugated).

  ## Examples

      iex> Nx.LinAlg.adjoint(Nx.tensor([[1, 2], [3, 4]]))
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 3],
          [2, 4]
        ]
      >
  """
  def adjoint(t) do
    t = Nx.to_tensor(t)
    rank = Nx.rank(t)
    axes = if rank > 2, do: Enum.to_list(0..(rank - 3)) ++ [rank - 1, rank - 2], else: nil
    transposed = if axes, do: Nx.transpose(t, axes: axes), else: Nx.transpose(t)
    if Nx.Type.complex?(t.type), do: Nx.conjugate(transposed), else: transposed
  end

  @doc """
  `a` multiplied by itself `power` times (`power` an integer; 0 gives the identity, a
  negative power the power of the inverse), for a square matrix or a batch of them, by
  repeated squaring.

  ## Examples

      iex> Nx.LinAlg.matrix_power(Nx.tensor([[1, 1], [0, 1]]), 5)
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 5],
          [0, 1]
        ]
      >

      iex> Nx.LinAlg.matrix_power(Nx.tensor([[1, 2], [3, 4], [5, 6]]), 1)
      ** (ArgumentError) matrix_power/2 expects a square matrix or a batch of square matrices, got tensor with shape: {3, 2}
  """
  def matrix_power(a, power) when is_integer(power) do
    a = Nx.to_tensor(a)
    shape = a.shape
    rank = tuple_size(shape)

    unless rank >= 2 and elem(shape, rank - 1) == elem(shape, rank - 2) do
      raise ArgumentError,
            "matrix_power/2 expects a square matrix or a batch of square matrices, got " <>
              "tensor with shape: #{inspect(shape)}"
    end

    cond do
      power == 0 -> Nx.eye(shape, type: a.type)
      power < 0 -> a |> invert() |> matrix_power(-power)
      true -> square_and_multiply(a, power, rank)
    end
  end

  defp square_and_multiply(a, power, rank) do
    batch = Enum.to_list(0..(rank - 3)//1)
    mul = &Nx.dot(&1, [rank - 1], batch, &2, [rank - 2], batch)

    # the bits of power from the lowest: multiply in the current square where a bit is set
    {result, _square} =
      power
      |> Integer.digits(2)
      |> Enum.reverse()
      |> Enum.with_index()
      |> Enum.reduce({nil, a}, fn {bit, i}, {result, square} ->
        square = if i == 0, do: square, else: mul.(square, square)
        result = if bit == 1, do: if(result, do: mul.(result, square), else: square), else: result
        {result, square}
      end)

    result
  end

  @doc """
  The norm of a vector or a matrix.

  Options: `:ord` (see below), `:axes` and `:keep_axes` (for the element-wise norms).
  Vectors: `nil` or an integer `p` (the p-norm; 0 counts the nonzero entries), `:inf`
  and `:neg_inf` (largest / smallest magnitude). Matrices: `nil` and `:frobenius` (the
  square root of the sum of squares), `:nuclear` (the sum of the singular values), `1` /
  `-1` (largest / smallest column sum of magnitudes), `:inf` / `:neg_inf` (the same of
  rows), `2` / `-2` (largest / smallest singular value). The result is real. Where Nx 0.7.2
  answers otherwise (its `ord: 2` of a matrix is the Frobenius norm; with `:axes` it scales
  by the wrong axis's maxima) we give the definition's number: docs/COMPATIBILITY.md.

  ## Examples

      iex> Nx.LinAlg.norm(Nx.tensor([3, 4]))
      #Nx.Tensor<
        f32
        5.0
      >

      iex> Nx.LinAlg.norm(Nx.tensor([[1, -2], [3, -4]]), ord: :inf)
      #Nx.Tensor<
        f32
        7.0
      >

      iex> Nx.LinAlg.norm(Nx.tensor([[[1]]]))
      ** (ArgumentError) expected 1-D or 2-D tensor, got tensor with shape {1, 1, 1}
  """
  def norm(t, opts \\ []) do
    opts = keyword!(opts, [:ord, :axes, :keep_axes])
    t = Nx.to_tensor(t)
    rank = Nx.rank(t)

    unless rank in [1, 2] do
      raise ArgumentError, "expected 1-D or 2-D tensor, got tensor with shape #{inspect(t.shape)}"
    end

    reduce_opts = Keyword.take(opts, [:axes, :keep_axes])

    case opts[:ord] do
      nil ->
        p_norm(t, 2, reduce_opts)

      :frobenius when rank == 2 ->
        p_norm(t, 2, reduce_opts)

      :frobenius ->
        raise ArgumentError, "expected a 2-D tensor for ord: :frobenius, got a 1-D tensor"

      :nuclear when rank == 2 ->
        {_u, s, _vt} = svd(t)
        Nx.sum(s)

      :nuclear ->
        raise ArgumentError, "nuclear norm not supported for rank != 2"

      ord when ord in [:inf, :neg_inf] ->
        magnitudes = Nx.abs(t)
        magnitudes = if rank == 2, do: Nx.sum(magnitudes, axes: [1]), else: magnitudes
        extreme = if ord == :inf, do: &Nx.reduce_max/2, else: &Nx.reduce_min/2
        magnitudes |> extreme.(reduce_opts) |> Nx.as_type(Nx.Type.to_real(t.type))

      0 when rank == 1 ->
        t |> Nx.not_equal(0) |> Nx.sum(reduce_opts) |> Nx.as_type(Nx.Type.to_real(t.type))

      ord when rank == 2 and ord in [1, -1] ->
        extreme = if ord == 1, do: &Nx.reduce_max/2, else: &Nx.reduce_min/2

        t
        |> Nx.abs()
        |> Nx.sum(axes: [0])
        |> extreme.(reduce_opts)
        |> Nx.as_type(Nx.Type.to_real(t.type))

      ord when rank == 2 and ord in [2, -2] ->
        {_u, s, _vt} = svd(t)
        if ord == 2, do: Nx.reduce_max(s, reduce_opts), else: Nx.reduce_min(s, reduce_opts)

      ord when rank == 2 and is_integer(ord) ->
        raise ArgumentError, "invalid :ord for 2-D tensor, got: #{inspect(ord)}"

      ord when is_integer(ord) ->
        p_norm(t, ord, reduce_opts)

      ord ->
        raise ArgumentError, "unknown ord #{inspect(ord)}"
    end
  end

  # (sum |x / m|^p)^(1/p) * m with m the largest magnitude (1 where it is 0), as Nx computes it
  # (m over the reduced axes, kept for the division, then shaped as the sum)
  defp p_norm(t, p, opts) do
    real = Nx.Type.to_floating(Nx.Type.to_real(t.type))
    magnitudes = Nx.abs(t)
    largest = Nx.reduce_max(magnitudes, axes: opts[:axes], keep_axes: true)
    scale = Nx.select(Nx.greater(largest, 0), largest, 1)

    norm =
      magnitudes
      |> Nx.divide(scale)
      |> Nx.pow(p)
      |> Nx.sum(opts)
      |> Nx.pow(Nx.tensor(1 / p, type: real))

    Nx.multiply(norm, Nx.reshape(scale, Nx.shape(norm)))
  end

  @doc """
  The Moore-Penrose pseudo-inverse: `1 / x` of a scalar, `adjoint(v) / norm(v)^2` of a
  vector, `V . diag(1 / s) . U^H` of a matrix (from its thin SVD, singular values below
  `:eps` (default `1.0e-10`) treated as zero, and so are those that are zero up to rounding:
  at most `10 * max(m, n) * epsilon` of the type times the largest, as in JAX and NumPy,
  where Nx's own SVD gives exact zeros); all zeros for a tensor whose entries are all within
  `:eps` of zero.

  ## Examples

      iex> Nx.LinAlg.pinv(2)
      #Nx.Tensor<
        f32
        0.5
      >

      iex> Nx.LinAlg.pinv(Nx.tensor([0, 0, 0]))
      #Nx.Tensor<
        f32[3]
        [0.0, 0.0, 0.0]
      >

      iex> Nx.LinAlg.pinv(Nx.tensor([[2.0, 0.0], [0.0, 4.0], [0.0, 0.0]]))
      #Nx.Tensor<
        f32[2][3]
        [
          [0.5, 0.0, 0.0],
          [0.0, 0.25, 0.0]
        ]
      >
  """
  def pinv(t, opts \\ []) do
    opts = keyword!(opts, eps: 1.0e-10)
    t = Nx.to_tensor(t)
    eps = opts[:eps]
    type = Nx.Type.to_floating(t.type)

    inverse =
      case Nx.rank(t) do
        0 ->
          Nx.divide(1, t)

        1 ->
          Nx.divide(adjoint(t), Nx.pow(norm(t), 2))

        _ ->
          {u, s, vt} = svd(t, full_matrices?: false)
          small = Nx.logical_or(Nx.less(Nx.abs(s), eps), rounding_noise(s, t))
          s_inv = Nx.select(small, 0, Nx.divide(1, Nx.select(small, 1, s)))
          Nx.dot(adjoint(vt), Nx.multiply(Nx.new_axis(s_inv, -1), adjoint(u)))
      end

    zero = t |> Nx.abs() |> Nx.less_equal(eps) |> Nx.all()
    Nx.select(zero, Nx.broadcast(Nx.tensor(0, type: type), inverse.shape), inverse)
  end

  # Singular values that are zero up to the rounding of the factorization: at most
  # 10 * max(m, n) * epsilon of the type times the largest one (JAX's and NumPy's default
  # cutoff). Nx 0.7.2's own SVD returns such values as exact zeros; LAPACK's returns them as
  # noise (about 1.0e-7 in f32), whose inverse would swamp the pseudo-inverse.
  defp rounding_noise(s, t) do
    {m, n} = {Nx.axis_size(t, -2), Nx.axis_size(t, -1)}
    real = t.type |> Nx.Type.to_floating() |> Nx.Type.to_real()
    largest = Nx.reduce_max(s, axes: [-1], keep_axes: true)
    Nx.less_equal(s, Nx.multiply(largest, 10 * max(m, n) * Nx.Type.epsilon(real)))
  end

  @doc """
  The rank of a matrix: the number of its singular values above
  `eps * max(m, n) * largest singular value` (`:eps` defaults to `1.0e-7`), as a `u64`.

  ## Examples

      iex> Nx.LinAlg.matrix_rank(Nx.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 2, 3, 4]]))
      #Nx.Tensor<
        u64
        2
      >

      iex> Nx.LinAlg.matrix_rank(Nx.tensor([1, 2, 3]))
      ** (ArgumentError) tensor must have rank 2, got rank 1 with shape {3}
  """
  def matrix_rank(a, opts \\ []) do
    opts = keyword!(opts, eps: 1.0e-7)
    a = Nx.to_tensor(a)

    if Nx.Type.complex?(a.type) do
      raise ArgumentError, "Nx.LinAlg.matrix_rank/2 is not yet implemented for complex inputs"
    end

    unless Nx.rank(a) == 2 do
      raise ArgumentError,
            "tensor must have rank 2, got rank #{Nx.rank(a)} with shape #{inspect(a.shape)}"
    end

    {m, n} = a.shape
    {_u, s, _vt} = svd(a)
    tolerance = Nx.multiply(opts[:eps] * max(m, n), Nx.reduce_max(s))
    s |> Nx.greater(tolerance) |> Nx.sum() |> Nx.as_type({:u, 64})
  end

  @doc """
  The least-squares solution `x` of `a . x = b` for a matrix `a` and a vector `b`: `solve/2`
  for a square `a`, `pinv(a, eps: 1.0e-15) . b` otherwise.

  ## Examples

      iex> Nx.LinAlg.least_squares(Nx.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), Nx.tensor([2.0, 3.0, 5.0]))
      #Nx.Tensor<
        f32[2]
        [1.0, 3.0]
      >

      iex> Nx.LinAlg.least_squares(Nx.tensor([1, 2, 3]), Nx.tensor([1, 2]))
      ** (ArgumentError) tensor of 1st argument must have rank 2, got rank 1 with shape {3}
  """
  def least_squares(a, b) do
    a = Nx.to_tensor(a)
    b = Nx.to_tensor(b)

    if Nx.Type.complex?(a.type) or Nx.Type.complex?(b.type) do
      raise ArgumentError, "Nx.LinAlg.least_squares/2 is not yet implemented for complex inputs"
    end

    unless Nx.rank(a) == 2 do
      raise ArgumentError,
            "tensor of 1st argument must have rank 2, got rank #{Nx.rank(a)} with shape " <>
              "#{inspect(a.shape)}"
    end

    unless Nx.rank(b) == 1 do
      raise ArgumentError,
            "tensor of 2nd argument must have rank 1, got rank #{Nx.rank(b)} with shape " <>
              "#{inspect(b.shape)}"
    end

    {m, n} = a.shape

    unless m == elem(b.shape, 0) do
      raise ArgumentError,
            "the number of rows of the matrix as the 1st argument and the number of columns " <>
              "of the vector as the 2nd argument must be the same, got 1st argument shape " <>
              "#{inspect(a.shape)} and 2nd argument shape #{inspect(b.shape)}"
    end

    if m == n, do: solve(a, b), else: a |> pinv(eps: 1.0e-15) |> Nx.dot(b)
  end
end
