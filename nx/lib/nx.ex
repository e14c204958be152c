defmodule Nx do
  @moduledoc """
  Numerical Elixir on JAX: the Nx 0.7 tensor API.

  Tensors are created and read here, in Elixir (`tensor/2`, `from_binary/3`, `to_list/1`,
  ...). Every operation on tensors (`add/2`, `sum/2`, `dot/2`, ...) checks its arguments
  and computes the output type and shape here, raising `ArgumentError` with Nx's messages,
  then hands one op to `Nx.Defn.Expr.apply_op/4`: inside `defn` that records an expression
  node, outside it ships the op to a JAX worker and returns a concrete tensor.

      iex> t = Nx.tensor([[1, 2], [3, 4]])
      iex> Nx.shape(t)
      {2, 2}

  Numbers given to operations become tensors: integers `{:s, 64}`, floats `{:f, 32}`. A
  number combined with a tensor takes the tensor's type where it can (Nx's weak typing):
  `Nx.add(Nx.tensor([1, 2], type: :u8), 1)` stays `u8`, while adding `1.5` gives `f32`.

  Broadcasting follows Nx: shapes are aligned on the right and each pair of dimensions must
  be equal or one of them 1.
  """

  alias Nx.Tensor, as: T

  @type t :: number | T.t()

  @type shape :: tuple

  @type axis :: integer

  @type axes :: [axis]

  @doc type: :guards
  @doc """
  Guard: whether `t` is a tensor or a number.

  ## Examples

      iex> is_tensor(1)
      true
      iex> is_tensor(:foo)
      false

  """
  defguard is_tensor(t) when is_number(t) or is_struct(t, T)

  # what a tensor's element can be written from: a number, a boolean, a non-finite atom or a
  # Complex (Nx.tensor/2's values, to_tensor/1's scalars, the numbers of a binary op)
  defguardp is_scalar_value(x)
            when is_number(x) or is_boolean(x) or x in [:nan, :infinity, :neg_infinity] or
                   is_struct(x, Complex)

  ## Creation

  @doc type: :creation
  @doc """
  Builds a tensor from a number, a boolean, `:nan`/`:infinity`/`:neg_infinity`, or an
  arbitrarily nested list of those.

  Integers give `{:s, 64}`, floats `{:f, 32}`; a list mixing integers and floats gives
  `{:f, 32}`. The `:type` option sets the type explicitly (integers out of range wrap
  around, floats stored in an integer type are truncated).

  ## Examples

      iex> Nx.tensor([1, 2, 3])
      #Nx.Tensor<
        s64[3]
        [1, 2, 3]
      >

      iex> Nx.tensor([[1, 2.5], [3, 4]])
      #Nx.Tensor<
        f32[2][2]
        [
          [1.0, 2.5],
          [3.0, 4.0]
        ]
      >

      iex> Nx.tensor(1.5, type: :f64)
      #Nx.Tensor<
        f64
        1.5
      >

      iex> Nx.tensor([[1, 2], [3]])
      ** (ArgumentError) cannot build tensor because lists have different shapes, got {2} at position 0 and {1} at position 1

  """
  def tensor(data, opts \\ [])

  def tensor(%T{} = tensor, opts) do
    opts = keyword!(opts, [:type, :names, :backend])

    # a tensor is not moved: it must be on the backend asked for (Nx's check)
    with backend when backend != nil <- opts[:backend],
         {module, _} = backend!(backend),
         %given{} when given != module <- tensor.data do
      raise ArgumentError,
            "Nx.tensor/2 wants to allocate on backend #{inspect(module)} " <>
              "but it was given a tensor allocated on #{inspect(given)}"
    end

    # the names are those given (none by default), which must not contradict the tensor's
    # (Nx's)
    names = Nx.Shape.named_axes!(opts[:names], tensor.shape)
    Nx.Shape.merge_names!(axis_names(tensor), names)
    tensor = %T{tensor | names: names}

    # the type, when given, must be the tensor's (Nx's check: a tensor is not converted)
    with type when type != nil <- opts[:type],
         false <- Nx.Type.normalize!(type) == tensor.type do
      raise ArgumentError,
            "Nx.tensor/2 expects a tensor with type #{inspect(type)} " <>
              "but it was given a tensor of type #{inspect(tensor.type)}"
    end

    tensor
  end

  def tensor(data, opts) when is_list(opts) do
    opts = keyword!(opts, [:type, :names, :backend])
    shape = data_shape(data)
    names = Nx.Shape.named_axes!(opts[:names], shape)
    flat = flatten_data(data, [])
    check_values!(flat)
    type = if type = opts[:type], do: Nx.Type.normalize!(type), else: infer_list_type(flat)
    %T{from_flat(flat, type, shape) | names: names}
  end

  defp data_shape(list) when is_list(list) do
    case Enum.map(list, &data_shape/1) do
      # Nx 0.7.2 has no empty tensors: an empty list anywhere is an invalid value
      [] ->
        raise ArgumentError, "invalid value given to Nx.tensor/1, got: []"

      [first | _] = shapes ->
        shapes
        |> Enum.with_index()
        |> Enum.each(fn {shape, i} ->
          if shape != first do
            raise ArgumentError,
                  "cannot build tensor because lists have different shapes, " <>
                    "got #{inspect(first)} at position 0 and #{inspect(shape)} at position #{i}"
          end
        end)

        Tuple.insert_at(first, 0, length(list))
    end
  end

  defp data_shape(_scalar), do: {}

  defp flatten_data(list, acc) when is_list(list),
    do: List.foldr(list, acc, &flatten_data/2)

  defp flatten_data(x, acc), do: [x | acc]

  defp check_values!(flat) do
    for x <- flat, not is_scalar_value(x) do
      # Nx 0.7.2's wording (a number, a boolean, a Complex, :nan, :infinity or :neg_infinity
      # is expected)
      raise ArgumentError, "invalid value given to Nx.tensor/1, got: #{inspect(x)}"
    end
  end

  defp infer_list_type([]), do: {:f, 32}

  defp infer_list_type([first | rest]) do
    Enum.reduce(rest, Nx.Type.infer(first), &Nx.Type.merge(Nx.Type.infer(&1), &2))
  end

  defp from_flat(flat, type, shape) do
    from_binary_data(Nx.BinaryBackend.from_list(flat, type), type, shape)
  end

  defp from_binary_data(binary, type, shape) do
    %T{
      data: %Nx.BinaryBackend{state: binary},
      type: type,
      shape: shape,
      names: List.duplicate(nil, tuple_size(shape))
    }
  end

  for t <- [:u8, :u16, :u32, :u64, :s8, :s16, :s32, :s64, :bf16, :f16, :f32, :f64] do
    @doc type: :creation
    @doc """
    `Nx.tensor(data, type: :#{t})`.

    ## Examples

        iex> Nx.#{t}([1, 2]) |> Nx.type()
        #{inspect(Nx.Type.normalize!(t))}
    """
    def unquote(t)(data), do: tensor(data, type: unquote(t))
  end

  @doc type: :creation
  @doc """
  A tensor with a type and a shape but no data, to describe the inputs of a function.

  ## Examples

      iex> t = Nx.template({2, 3}, :f32)
      iex> {Nx.shape(t), Nx.type(t)}
      {{2, 3}, {:f, 32}}

  """
  def template(shape, type, opts \\ []) do
    opts = keyword!(opts, [:names])
    shape = Nx.Shape.validate!(shape)
    names = Nx.Shape.named_axes!(opts[:names], shape)
    %T{data: nil, type: Nx.Type.normalize!(type), shape: shape, names: names}
  end

  @doc type: :creation
  @doc """
  A tensor counting up: with `axis: nil` (the default) `0..size-1` in row-major order,
  otherwise counting along `axis`. `shape` is a tuple or a tensor; `:type` defaults to
  `{:s, 64}`. With `vectorized_axes: [name: size, ...]` the result is vectorized, each entry
  the same iota.

  ## Examples

      iex> Nx.iota({2, 3}, axis: 1)
      #Nx.Tensor<
        s64[2][3]
        [
          [0, 1, 2],
          [0, 1, 2]
        ]
      >

  """
  def iota(shape, opts \\ []) do
    opts = keyword!(opts, [:axis, :names, :backend, :vectorized_axes, type: {:s, 64}])
    names = opts[:names] || shape_names(shape)
    shape = Nx.Shape.validate!(shape_of(shape))
    names = Nx.Shape.named_axes!(names, shape)
    type = Nx.Type.normalize!(opts[:type] || {:s, 64})
    axis = if axis = opts[:axis], do: Nx.Shape.normalize_axis(shape, axis, names)
    iota = apply_op(:iota, [], %{axis: axis}, type, shape, names)
    vectorized_iota(iota, opts[:vectorized_axes] || [])
  end

  # `vectorized_axes: [name: size, ...]`: every entry holds the same iota
  defp vectorized_iota(iota, []), do: iota

  defp vectorized_iota(iota, axes) do
    sizes = Keyword.values(axes) ++ Tuple.to_list(iota.shape)
    iota |> broadcast(List.to_tuple(sizes)) |> vectorize(axes)
  end

  @doc type: :creation
  @doc """
  The identity matrix: `n` gives `{n, n}`; a shape (rank >= 2) gives a batch of identities
  over its last two axes. `:type` defaults to `{:s, 64}`.

  ## Examples

      iex> Nx.eye(2)
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 0],
          [0, 1]
        ]
      >

  """
  def eye(n_or_shape, opts \\ [])

  def eye(n, opts) when is_integer(n), do: eye({n, n}, opts)

  def eye(shape, opts) do
    opts = keyword!(opts, [:names, :backend, :vectorized_axes, type: {:s, 64}])
    shape = Nx.Shape.validate!(shape_of(shape))
    type = Nx.Type.normalize!(opts[:type] || {:s, 64})
    rank = tuple_size(shape)
    vectorized_axes = opts[:vectorized_axes] || []

    # (Nx 0.7.2 accepts a rank-1 shape only with vectorized axes: each entry is then [1, 0, ...])
    if rank < 2 and (rank == 0 or vectorized_axes == []) do
      raise ArgumentError,
            "eye/2 expects a shape with at least 2 dimensions or an integer, got: " <>
              inspect(shape)
    end

    names = Nx.Shape.named_axes!(opts[:names], shape)

    eye =
      composite(
        fn ->
          case rank do
            1 ->
              iota(shape) |> equal(0) |> as_type(type)

            _ ->
              iota(shape, axis: rank - 2) |> equal(iota(shape, axis: rank - 1)) |> as_type(type)
          end
        end,
        []
      )
      |> rename(names)

    case vectorized_axes do
      [] ->
        eye

      axes ->
        full = List.to_tuple(Keyword.values(axes) ++ Tuple.to_list(shape))
        eye |> broadcast(full) |> vectorize(axes) |> rename(names)
    end
  end

  @doc type: :creation
  @doc """
  A `{n, m}` matrix of type `u8` with 1 on and below the diagonal `:k` (0 by default:
  the main one; positive above it, negative below) and 0 elsewhere.

  ## Examples

      iex> Nx.tri(3, 3, k: 1)
      #Nx.Tensor<
        u8[3][3]
        [
          [1, 1, 0],
          [1, 1, 1],
          [1, 1, 1]
        ]
      >

  """
  def tri(n, m, opts \\ []) do
    k = keyword!(opts, k: 0)[:k]
    composite(fn -> triangle_mask({n, m}, k, :lower) end, [])
  end

  @doc type: :creation
  @doc """
  The lower triangle of the last two axes (on and below the diagonal `:k`, 0 by default;
  positive above the main one), zeros elsewhere. The tensor needs 2 axes or more.

  ## Examples

      iex> Nx.tril(Nx.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]]))
      #Nx.Tensor<
        s64[3][3]
        [
          [1, 0, 0],
          [4, 5, 0],
          [7, 8, 9]
        ]
      >

  """
  def tril(tensor, opts \\ []), do: triangle(tensor, opts, :lower, "tril")

  @doc type: :creation
  @doc """
  The upper triangle of the last two axes (on and above the diagonal `:k`, 0 by default;
  positive above the main one), zeros elsewhere. The tensor needs 2 axes or more.

  ## Examples

      iex> Nx.triu(Nx.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]]), k: 1)
      #Nx.Tensor<
        s64[3][3]
        [
          [0, 2, 3],
          [0, 0, 6],
          [0, 0, 0]
        ]
      >

  """
  def triu(tensor, opts \\ []), do: triangle(tensor, opts, :upper, "triu")

  defp triangle(tensor, opts, side, fun) do
    tensor = to_tensor(tensor)
    k = keyword!(opts, k: 0)[:k]

    if tuple_size(tensor.shape) < 2 do
      raise ArgumentError,
            "#{fun}/2 expects a tensor with at least 2 dimensions, got: #{inspect(tensor)}"
    end

    composite(
      fn t -> select(triangle_mask(t.shape, k, side), t, tensor(0, type: t.type)) end,
      [tensor]
    )
  end

  # 1 where the last two axes' (row, col) is on the `side` of the diagonal k (inclusive)
  defp triangle_mask(shape, k, side) do
    rank = tuple_size(shape)
    rows = add(iota(shape, axis: rank - 2), k)
    cols = iota(shape, axis: rank - 1)
    mask = if side == :lower, do: less_equal(cols, rows), else: greater_equal(cols, rows)
    as_type(mask, {:u, 8})
  end

  @doc type: :creation
  @doc """
  The diagonal `:offset` (0 by default; positive above the main one, negative below) of the
  last two axes; leading axes are batches.

  ## Examples

      iex> Nx.take_diagonal(Nx.iota({3, 3}))
      #Nx.Tensor<
        s64[3]
        [0, 4, 8]
      >
      iex> Nx.take_diagonal(Nx.iota({3, 3}), offset: 1)
      #Nx.Tensor<
        s64[2]
        [1, 5]
      >

  """
  def take_diagonal(tensor, opts \\ []) do
    tensor = to_tensor(tensor)
    offset = keyword!(opts, offset: 0)[:offset]
    rank = tuple_size(tensor.shape)

    if rank < 2 do
      raise ArgumentError,
            "take_diagonal/2 expects tensor of rank 2 or higher, got tensor of rank: #{rank}"
    end

    {rows, cols} = {elem(tensor.shape, rank - 2), elem(tensor.shape, rank - 1)}
    positions = diagonal_positions(rows, cols, offset)
    flat = Enum.map(positions, fn {r, c} -> r * cols + c end)
    batch = tensor.shape |> Tuple.delete_at(rank - 1) |> Tuple.delete_at(rank - 2)

    composite(
      fn t ->
        t
        |> reshape(Tuple.insert_at(batch, tuple_size(batch), rows * cols))
        |> take(tensor(flat, type: {:s, 64}), axis: rank - 2)
      end,
      [tensor]
    )
  end

  @doc type: :creation
  @doc """
  A square matrix with `tensor` (a vector) on the diagonal `:offset` (0 by default, positive
  above the main diagonal, negative below), zeros elsewhere.

  ## Examples

      iex> Nx.make_diagonal(Nx.tensor([1, 2]), offset: -1)
      #Nx.Tensor<
        s64[3][3]
        [
          [0, 0, 0],
          [1, 0, 0],
          [0, 2, 0]
        ]
      >

  """
  def make_diagonal(tensor, opts \\ []) do
    opts = keyword!(opts, offset: 0)
    tensor = to_tensor(tensor)
    offset = Keyword.get(opts, :offset, 0)

    unless tuple_size(tensor.shape) == 1 do
      raise ArgumentError,
            "make_diagonal/2 expects tensor of rank 1, got tensor of rank: " <>
              "#{tuple_size(tensor.shape)}"
    end

    unless is_integer(offset) do
      raise ArgumentError, "make_diagonal/2 expects an integer :offset, got: #{inspect(offset)}"
    end

    composite(fn t -> diagonal_matrix(t, offset) end, [tensor])
  end

  defp diagonal_matrix(t, offset) do
    {n} = t.shape
    m = n + Kernel.abs(offset)
    padded = pad(t, 0, [{0, Kernel.abs(offset), 0}])
    rows = iota({m, m}, axis: 0)
    cols = iota({m, m}, axis: 1)

    # offset >= 0: out[i][i + offset] = t[i]; offset < 0: out[j - offset][j] = t[j]
    {values, mask} =
      if offset >= 0,
        do: {broadcast(padded, {m, m}, axes: [0]), equal(add(rows, offset), cols)},
        else: {broadcast(padded, {m, m}, axes: [1]), equal(rows, add(cols, -offset))}

    select(mask, values, tensor(0, type: t.type))
  end

  @doc type: :creation
  @doc """
  Writes `diagonal` (a vector of the diagonal's length) on the diagonal `:offset` (0 by
  default) of a matrix. The output type merges both types.

  ## Examples

      iex> Nx.put_diagonal(Nx.broadcast(0, {3, 3}), Nx.tensor([1, 2]), offset: -1)
      #Nx.Tensor<
        s64[3][3]
        [
          [0, 0, 0],
          [1, 0, 0],
          [0, 2, 0]
        ]
      >

  """
  def put_diagonal(tensor, diagonal, opts \\ []) do
    {tensor, diagonal} = {to_tensor(tensor), to_tensor(diagonal)}
    offset = keyword!(opts, offset: 0)[:offset]

    unless tuple_size(tensor.shape) == 2 do
      raise ArgumentError,
            "put_diagonal/3 expects tensor of rank 2, got tensor of rank: " <>
              "#{tuple_size(tensor.shape)}"
    end

    unless tuple_size(diagonal.shape) == 1 do
      raise ArgumentError,
            "put_diagonal/3 expects diagonal of rank 1, got tensor of rank: " <>
              "#{tuple_size(diagonal.shape)}"
    end

    {rows, cols} = tensor.shape
    positions = diagonal_positions(rows, cols, offset)

    if length(positions) != elem(diagonal.shape, 0) do
      raise ArgumentError,
            "expected diagonal tensor of length: #{length(positions)}, got diagonal tensor of " <>
              "length: #{elem(diagonal.shape, 0)}"
    end

    indices = tensor(Enum.map(positions, &Tuple.to_list/1), type: {:s, 64})
    indexed_put(tensor, indices, diagonal)
  end

  # the {row, col} of each element of the diagonal `offset` of a rows x cols matrix (Nx
  # 0.7.2 names the matrix's axes 0 and 1 in its messages, whatever the batch axes)
  defp diagonal_positions(rows, cols, offset) do
    cond do
      offset >= 0 and offset >= cols ->
        raise ArgumentError,
              "offset must be less than length of axis 1 when positive, got: #{offset}"

      offset < 0 and -offset >= rows ->
        raise ArgumentError,
              "absolute value of offset must be less than length of axis 0 when negative, " <>
                "got: #{offset}"

      true ->
        {row0, col0} = if offset >= 0, do: {0, offset}, else: {-offset, 0}
        count = Kernel.min(rows - row0, cols - col0)
        for i <- 0..(count - 1), do: {row0 + i, col0 + i}
    end
  end

  @doc type: :creation
  @doc """
  Builds a one-dimensional tensor from native-endian bytes of `type`.

  ## Examples

      iex> Nx.from_binary(<<1, 2, 3>>, :u8)
      #Nx.Tensor<
        u8[3]
        [1, 2, 3]
      >

      iex> Nx.from_binary(<<1, 2, 3>>, :s16)
      ** (ArgumentError) binary does not match the given size

  """
  def from_binary(binary, type, opts \\ []) when is_binary(binary) do
    keyword!(opts, [:backend])
    type = Nx.Type.normalize!(type)
    bytes = Nx.Type.byte_size(type)

    if binary == <<>>, do: raise(ArgumentError, "cannot build an empty tensor")

    if rem(Kernel.byte_size(binary), bytes) != 0 do
      raise ArgumentError, "binary does not match the given size"
    end

    from_binary_data(binary, type, {div(Kernel.byte_size(binary), bytes)})
  end

  @doc type: :creation
  @doc """
  `n` evenly spaced values from `start` to `stop` (numbers, or tensors of one shape `s`,
  giving `s` with an axis of `n` appended).

  ## Options

    * `:n` - the number of values (required, a positive integer)
    * `:type` - the output type (`{:f, 32}`); integer types truncate values computed in `f32`
    * `:endpoint` - whether `stop` is the last value (`true`) or excluded (`false`)
    * `:name` - accepted and ignored (axis names are not supported)

  ## Examples

      iex> Nx.linspace(5, 8, n: 5)
      #Nx.Tensor<
        f32[5]
        [5.0, 5.75, 6.5, 7.25, 8.0]
      >
      iex> Nx.linspace(0, 24, n: 8, type: :u8)
      #Nx.Tensor<
        u8[8]
        [0, 3, 6, 10, 13, 17, 20, 24]
      >
      iex> Nx.linspace(0, 10, n: 4, endpoint: false)
      #Nx.Tensor<
        f32[4]
        [0.0, 2.5, 5.0, 7.5]
      >

  """
  def linspace(start, stop, opts \\ []) do
    opts = keyword!(opts, [:n, :name, type: {:f, 32}, endpoint: true])
    n = opts[:n]

    unless is_integer(n) and n >= 1 do
      raise ArgumentError, "expected n to be a non-negative integer, got: #{inspect(n)}"
    end

    type = Nx.Type.normalize!(opts[:type])
    {start, stop} = {to_tensor(start), to_tensor(stop)}

    if start.shape != stop.shape do
      raise ArgumentError,
            "expected start and stop to have the same shape. Got shapes " <>
              "#{inspect(start.shape)} and #{inspect(stop.shape)}"
    end

    divisor = if opts[:endpoint], do: n - 1, else: n
    float = Nx.Type.to_floating(type)

    composite(
      fn a, b ->
        {a, b} = {as_type(a, float), as_type(b, float)}
        step = if divisor == 0, do: multiply(a, 0), else: divide(subtract(b, a), divisor)
        axis = tuple_size(a.shape)
        steps = iota(Tuple.insert_at(a.shape, tuple_size(a.shape), n), axis: axis, type: float)
        at = fn x -> new_axis(x, axis) end
        as_type(add(at.(a), multiply(steps, at.(step))), type)
      end,
      [start, stop]
    )
    |> rename(axis_names(start) ++ [opts[:name]])
  end

  @doc type: :element
  @doc """
  A tensor of `tensor`'s shape (vectorized axes included) filled with `value`, of type
  `:type` (by default the tensor's and the value's types merged).

  ## Examples

      iex> Nx.fill(Nx.iota({2, 2}), 5)
      #Nx.Tensor<
        s64[2][2]
        [
          [5, 5],
          [5, 5]
        ]
      >

  """
  def fill(tensor, value, opts \\ []) do
    tensor = to_tensor(tensor)
    opts = Keyword.validate!(opts, [:type])
    type = Nx.Type.normalize!(opts[:type] || Nx.Type.merge(tensor.type, type(value)))
    composite(fn t -> as_type(select(1, value, t), type) end, [tensor])
  end

  ## Sigils

  @doc type: :creation
  @doc """
  A vector (`~V`) from numbers separated by spaces, with an optional type suffix (`u8`,
  `s32`, `f64`, `c64`, ...; Nx's default types otherwise). Use with
  `import Nx, only: :sigils`.

  ## Examples

      iex> import Nx, only: :sigils
      iex> ~V[1 2 3]f32
      #Nx.Tensor<
        f32[3]
        [1.0, 2.0, 3.0]
      >

  """
  defmacro sigil_V({:<<>>, _meta, [string]}, modifiers) when is_binary(string) do
    {rows, type} = sigil_parse!(string, modifiers, "~V")

    numbers =
      case rows do
        [row] ->
          row

        _ ->
          raise ArgumentError, "must be one-dimensional"
      end

    quote do: Nx.tensor(unquote(Macro.escape(numbers)), type: unquote(type))
  end

  @doc type: :creation
  @doc """
  A matrix (`~M`) from rows of numbers separated by spaces, rows separated by newlines or
  `;`, with an optional type suffix as for `sigil_V/2`.

  ## Examples

      iex> import Nx, only: :sigils
      iex> ~M[1 2; 3 4]u8
      #Nx.Tensor<
        u8[2][2]
        [
          [1, 2],
          [3, 4]
        ]
      >

  """
  defmacro sigil_M({:<<>>, _meta, [string]}, modifiers) when is_binary(string) do
    {rows, type} = sigil_parse!(string, modifiers, "~M")

    if rows |> Enum.map(&length/1) |> Enum.uniq() |> length() != 1 do
      raise ArgumentError, "~M expects rows of the same length, got: #{inspect(string)}"
    end

    quote do: Nx.tensor(unquote(Macro.escape(rows)), type: unquote(type))
  end

  @sigil_types Enum.map(Nx.Type.all(), fn {kind, bits} -> "#{kind}#{bits}" end)

  # -> {rows of numbers, type or nil}
  defp sigil_parse!(string, modifiers, sigil) do
    suffix = List.to_string(modifiers)

    type =
      cond do
        suffix == "" ->
          nil

        suffix in @sigil_types ->
          String.to_atom(suffix)

        true ->
          raise ArgumentError,
                "invalid numerical type: #{sigil_type_text(suffix)} (see Nx.Type docs for all " <>
                  "supported types)"
      end

    rows =
      string
      |> String.split(["\n", ";"], trim: true)
      |> Enum.map(&String.split/1)
      |> Enum.reject(&(&1 == []))
      |> Enum.map(fn row -> Enum.map(row, &sigil_number!(&1, sigil)) end)

    if rows == [], do: raise(ArgumentError, "#{sigil} expects at least one number")
    {rows, type}
  end

  # the suffix as the type tuple it spells (`f8` -> `{:f, 8}`), as Nx's message shows it
  defp sigil_type_text(suffix) do
    case Regex.run(~r/^([a-z]+)(\d+)$/, suffix) do
      [_, kind, bits] -> inspect({String.to_atom(kind), String.to_integer(bits)})
      nil -> inspect(suffix)
    end
  end

  defp sigil_number!(word, sigil) do
    case {Integer.parse(word), Float.parse(word)} do
      {{int, ""}, _} -> int
      {_, {float, ""}} -> float
      _ -> sigil_special!(word, sigil)
    end
  end

  defp sigil_special!("Inf", _), do: :infinity
  defp sigil_special!("-Inf", _), do: :neg_infinity
  defp sigil_special!("NaN", _), do: :nan

  # complex words as Nx writes them: `1.0+2.0i`, `2i`, `-1i`, `1+i`, `1-i`, `Inf-Infi`, `NaNi`
  defp sigil_special!(word, sigil) do
    with true <- String.ends_with?(word, "i"),
         body = String.slice(word, 0..-2//1),
         {re, im} <- sigil_complex_parts(body),
         {:ok, re} <- sigil_part(re, 0.0),
         {:ok, im} <- sigil_part(im, 1.0) do
      Complex.new(re, im)
    else
      _ -> sigil_not_a_number!(word, sigil)
    end
  end

  defp sigil_not_a_number!(word, _sigil),
    do: raise(ArgumentError, "expected a numerical value for tensor, got #{word}")

  # splits at the last sign that is not the first character nor an exponent's
  defp sigil_complex_parts(body) do
    split =
      body
      |> String.graphemes()
      |> Enum.with_index()
      |> Enum.filter(fn {char, i} ->
        char in ["+", "-"] and i > 0 and String.at(body, i - 1) not in ["e", "E"]
      end)
      |> List.last()

    case split do
      nil -> {"", body}
      {_, i} -> {String.slice(body, 0, i), String.slice(body, i..-1//1)}
    end
  end

  # a real or imaginary part: a number, Inf or NaN with an optional sign; "" (or a lone sign,
  # for the imaginary part) stands for `default` with that sign
  defp sigil_part("", default), do: {:ok, default}
  defp sigil_part("+", default), do: {:ok, default}
  defp sigil_part("-", default), do: {:ok, -default}

  defp sigil_part(text, _default) do
    {sign, unsigned} =
      case text do
        "-" <> rest -> {-1, rest}
        "+" <> rest -> {1, rest}
        rest -> {1, rest}
      end

    case {unsigned, Float.parse(unsigned)} do
      {"Inf", _} -> {:ok, if(sign > 0, do: :infinity, else: :neg_infinity)}
      {"NaN", _} -> {:ok, :nan}
      {_, {value, ""}} -> {:ok, sign * value}
      _ -> :error
    end
  end

  ## Conversion

  @doc type: :conversion
  @doc """
  Returns the native-endian bytes of a concrete tensor.

  ## Options

    * `:limit` - only the first `limit` elements (row-major)

  ## Examples

      iex> Nx.to_binary(Nx.tensor([1, 2], type: :u8))
      <<1, 2>>

      iex> Nx.to_binary(Nx.tensor([1, 2, 3], type: :u8), limit: 2)
      <<1, 2>>

  """
  def to_binary(tensor, opts \\ []) do
    opts = keyword!(opts, [:limit])

    binary =
      case concrete!(to_tensor(tensor), :to_binary) do
        %T{data: %Nx.BinaryBackend{state: binary}} -> binary
        %T{data: %backend{}} = resident -> backend.to_binary(resident)
      end

    case opts[:limit] do
      nil ->
        binary

      limit ->
        binary_part(
          binary,
          0,
          Kernel.min(Kernel.byte_size(binary), limit * element_bytes(tensor))
        )
    end
  end

  defp element_bytes(tensor) do
    {_kind, bits} = to_tensor(tensor).type
    Kernel.div(bits, 8)
  end

  defp concrete!(%T{data: %Nx.BinaryBackend{}} = tensor, _fun), do: tensor
  # a tensor whose data lives elsewhere (Nx.Backend): any data struct but an expression's
  defp concrete!(%T{data: %backend{}} = tensor, _fun) when backend != Nx.Defn.Expr, do: tensor

  defp concrete!(%T{} = tensor, fun) do
    raise ArgumentError,
          "cannot call Nx.#{fun} on a tensor without data (a template or an expression " <>
            "traced inside defn, got #{inspect_header(tensor)}); return the tensor from " <>
            "the defn function and read the result instead"
  end

  defp inspect_header(%T{type: type, shape: shape}) do
    Nx.Type.to_string(type) <> Enum.map_join(Tuple.to_list(shape), &"[#{&1}]")
  end

  @doc type: :conversion
  @doc """
  Converts a number into a scalar tensor; tensors are returned as they are.

  ## Examples

      iex> Nx.to_tensor(1.0)
      #Nx.Tensor<
        f32
        1.0
      >

  """
  def to_tensor(%T{} = tensor), do: tensor

  def to_tensor(number) when is_scalar_value(number), do: tensor(number)

  # a struct of its own Nx.LazyContainer implementation that stands for one tensor
  def to_tensor(%_{} = lazy) when not is_struct(lazy, Complex) do
    case Nx.Defn.Composite.expand_lazy(lazy, fn _template, make -> {__MODULE__, make} end) do
      {__MODULE__, make} -> to_tensor(make.())
      _ -> to_tensor!(lazy)
    end
  end

  def to_tensor(other), do: to_tensor!(other)

  # what is neither a tensor nor a number: Nx 0.7.2's errors (its protocol's, for a list, a
  # string, an atom or any other term that is not a container)
  defp to_tensor!(other) do
    cond do
      Nx.Container.impl_for(other) ->
        raise ArgumentError,
              "cannot convert #{inspect(other)} to tensor because it represents a collection " <>
                "of tensors, use Nx.stack/2 or Nx.concatenate/2 instead"

      is_list(other) ->
        raise Protocol.UndefinedError,
          protocol: Nx.LazyContainer,
          value: other,
          description:
            "lists are not valid tensors (and therefore not supported as defn inputs). " <>
              "However, you can convert them to tensors using Nx.tensor/1"

      is_atom(other) ->
        raise Protocol.UndefinedError, protocol: Nx.LazyContainer, value: other

      true ->
        raise Protocol.UndefinedError,
          protocol: Nx.LazyContainer,
          value: other,
          description:
            "data-structures given to defn/Nx must implement either Nx.LazyContainer or " <>
              "Nx.Container"
    end
  end

  @doc type: :conversion
  @doc """
  Returns the elements of a tensor as a flat list, in row-major order; `limit: n` returns
  only the first `n`.

  ## Examples

      iex> Nx.to_flat_list(Nx.tensor([[1, 2], [3, 4]]))
      [1, 2, 3, 4]

      iex> Nx.to_flat_list(Nx.tensor([1.0, 2.0, 3.0]), limit: 2)
      [1.0, 2.0]

  """
  def to_flat_list(tensor, opts \\ []) do
    opts = keyword!(opts, [:limit])
    tensor = to_tensor(tensor)
    Nx.BinaryBackend.to_list(to_binary(tensor, opts), tensor.type)
  end

  @doc type: :conversion
  @doc """
  Returns the elements of a tensor as a nested list following its shape (a scalar gives its
  number).

  ## Examples

      iex> Nx.to_list(Nx.tensor([[1, 2], [3, 4]]))
      [[1, 2], [3, 4]]

  """
  def to_list(tensor) do
    tensor = to_tensor(tensor)
    flat = to_flat_list(tensor)

    # a vectorized tensor reads as its devectorized data
    case Tuple.to_list(full_shape(tensor)) do
      [] -> hd(flat)
      dims -> nest(flat, dims)
    end
  end

  defp nest(flat, [_dim]), do: flat

  defp nest(flat, [dim | rest]) do
    chunk = Enum.reduce(rest, 1, &*/2)

    if chunk == 0 do
      List.duplicate(nest([], rest), dim)
    else
      flat |> Enum.chunk_every(chunk) |> Enum.map(&nest(&1, rest))
    end
  end

  @doc type: :conversion
  @doc ~S"""
  Wraps a tensor of at least one axis in an `Nx.Heatmap`, which `inspect` draws as a heatmap:
  the last two axes as rows and columns of cells (a vector as one row), each such slice
  shaded from its smallest to its largest finite value, the axes before them as nested
  brackets (see `Nx.Heatmap`). Vectorized axes are drawn as the leading axes.

  With ANSI colours each cell is a background of the terminal's grey ramp; without them, a
  digit from 0 (the smallest) to 9 (the largest). Windows consoles show ANSI colours once
  virtual terminal processing is turned on for the user:
  `reg add HKCU\Console /v VirtualTerminalLevel /t REG_DWORD /d 1`, then a new console.

  ## Options

    * `:ansi_enabled` - draw with ANSI colours or not; by default `IO.ANSI.enabled?/0`
    * `:ansi_whitespace` - what fills a coloured cell; by default `"\u3000"`, the
      ideographic space, as wide as two columns, so that cells come out nearly square

  ## Examples

      iex> Nx.tensor([[1, 2, 3], [4, 5, 6]]) |> Nx.to_heatmap(ansi_enabled: false) |> inspect()
      "#Nx.Heatmap<\n  s64[2][3]\n  \n  024\n  579\n>"

      iex> Nx.to_heatmap(Nx.tensor(1))
      ** (ArgumentError) cannot show heatmap for scalar tensors, got: #Nx.Tensor<
        s64
        1
      >

  """
  def to_heatmap(tensor, opts \\ []) when is_list(opts) do
    tensor = to_tensor(tensor)

    if tensor.shape == {} do
      raise ArgumentError, "cannot show heatmap for scalar tensors, got: #{inspect(tensor)}"
    end

    # (Nx 0.7.2 takes a complex tensor and fails when it is inspected)
    if match?({:c, _}, tensor.type) do
      raise ArgumentError,
            "cannot show heatmap for complex tensors (their values have no order), got a " <>
              "tensor of type #{Nx.Type.to_string(tensor.type)}: take Nx.abs/1, " <>
              "Nx.real/1 or Nx.phase/1 of it first"
    end

    %Nx.Heatmap{tensor: tensor, opts: opts}
  end

  @doc type: :conversion
  @doc """
  A stream of batches of `batch_size` entries of the first axis. `:leftover` is `:repeat`
  (the default: the last batch is completed with the first entries) or `:discard` (an
  incomplete last batch is dropped). A vectorized tensor is batched along its first
  vectorized axis: every batch is vectorized, that axis of size `batch_size`.

  ## Examples

      iex> Nx.iota({5, 2}) |> Nx.to_batched(2) |> Enum.map(&Nx.to_flat_list/1)
      [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
      iex> Nx.iota({5}) |> Nx.to_batched(2, leftover: :discard) |> Enum.map(&Nx.to_flat_list/1)
      [[0, 1], [2, 3]]

  """
  def to_batched(tensor, batch_size, opts \\ [])
      when is_integer(batch_size) and batch_size >= 1 do
    tensor = to_tensor(tensor)
    leftover = keyword!(opts, leftover: :repeat)[:leftover]

    unless leftover in [:repeat, :discard] do
      raise ArgumentError,
            "expected :leftover to be :repeat or :discard, got: #{inspect(leftover)}"
    end

    if tensor.shape == {} and tensor.vectorized_axes == [],
      do: raise(ArgumentError, "cannot batch non-vectorized scalar tensor #{inspect(tensor)}")

    # a vectorized tensor is batched along its first vectorized axis (as Nx 0.7.2 does):
    # each batch is vectorized again, that axis now of size batch_size
    vectorized_axes = tensor.vectorized_axes
    tensor = devectorize(tensor, keep_names: false)
    size = elem(tensor.shape, 0)

    if size < batch_size, do: raise(ArgumentError, "cannot batch beyond original tensor")

    revectorize = fn batch ->
      case vectorized_axes do
        [] -> batch
        [{name, _} | rest] -> vectorize(batch, [{name, batch_size} | rest])
      end
    end

    full = div(size, batch_size)
    rest = rem(size, batch_size)
    last = if rest > 0 and leftover == :repeat, do: [:leftover], else: []

    Stream.map(Enum.to_list(0..(full - 1)) ++ last, fn
      :leftover ->
        revectorize.(
          concatenate([
            slice_along_axis(tensor, full * batch_size, rest),
            slice_along_axis(tensor, 0, batch_size - rest)
          ])
        )

      i ->
        revectorize.(slice_along_axis(tensor, i * batch_size, batch_size))
    end)
  end

  @doc type: :conversion
  @doc """
  Returns the value of a scalar tensor: a number, or `:nan`, `:infinity`, `:neg_infinity`.

  ## Examples

      iex> Nx.to_number(Nx.tensor(3))
      3
      iex> Nx.to_number(Nx.tensor(:nan))
      :nan
      iex> Nx.to_number(Nx.tensor([1, 2]))
      ** (ArgumentError) cannot convert tensor of shape {2} to number

  """
  def to_number(tensor) do
    tensor = to_tensor(tensor)

    # Nx 0.7.2's messages, in its order
    if tensor.vectorized_axes != [] do
      raise ArgumentError,
            "cannot convert vectorized tensor with axes #{inspect(tensor.vectorized_axes)} " <>
              "and shape #{inspect(tensor.shape)} to number"
    end

    if tensor.shape != {} do
      raise ArgumentError, "cannot convert tensor of shape #{inspect(tensor.shape)} to number"
    end

    [number] = to_flat_list(tensor)
    number
  end

  @doc type: :conversion
  @doc """
  `tensor_or_container` with every tensor (and number) replaced by a template: the same
  type, shape and vectorized axes, no data (as `template/3` makes). Tuples and maps keep
  their structure.

  ## Examples

      iex> Nx.to_template({Nx.iota({2, 3}), 1.0}) == {Nx.template({2, 3}, :s64), Nx.template({}, :f32)}
      true

  """
  def to_template(tensor_or_container) do
    tensor_or_container
    |> Nx.Defn.Composite.expand_lazy(fn template, _make -> template end)
    |> Nx.Defn.Composite.traverse(&%T{to_tensor(&1) | data: nil})
  end

  ## Type

  @doc type: :type
  @doc """
  Converts a tensor to another type (floats to integers truncate toward zero).

  ## Examples

      iex> Nx.as_type(Nx.tensor([1.5, -1.5]), :s64)
      #Nx.Tensor<
        s64[2]
        [1, -1]
      >

  """
  def as_type(number, type) when is_number(number) or is_struct(number, Complex),
    do: tensor(number, type: type)

  def as_type(tensor, type) do
    tensor = to_tensor(tensor)
    type = Nx.Type.normalize!(type)

    if tensor.type == type do
      tensor
    else
      apply_op(:as_type, [tensor], %{}, type, tensor.shape, axis_names(tensor))
    end
  end

  @doc type: :type
  @doc """
  Reinterprets the bits of each element as `type`, which must have the same bit width.

  ## Examples

      iex> Nx.bitcast(Nx.tensor([1.0], type: :f32), :u32)
      #Nx.Tensor<
        u32[1]
        [1065353216]
      >

      iex> Nx.bitcast(Nx.tensor([1.0]), :s64)
      ** (ArgumentError) input type width must match new type width, got input type {:f, 32} and output type {:s, 64}

  """
  def bitcast(tensor, type) do
    tensor = tensor |> to_tensor() |> no_complex!(:bitcast, 2)
    type = Nx.Type.normalize!(type)

    if Nx.Type.complex?(type) do
      raise ArgumentError, "Nx.bitcast/2 does not support complex inputs"
    end

    if elem(tensor.type, 1) != elem(type, 1) do
      raise ArgumentError,
            "input type width must match new type width, got input type " <>
              "#{inspect(tensor.type)} and output type #{inspect(type)}"
    end

    apply_op(:bitcast, [tensor], %{}, type, tensor.shape, axis_names(tensor))
  end

  ## Shape

  @doc type: :shape
  @doc """
  Changes the shape (the size must stay the same); `shape` may be a tuple, possibly with
  one `:auto` dimension, or a tensor whose shape is used.

  ## Examples

      iex> Nx.reshape(Nx.tensor([1, 2, 3, 4]), {2, :auto})
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 2],
          [3, 4]
        ]
      >

  """
  def reshape(tensor, shape, opts \\ []) do
    # (Nx 0.7.2 ignores other options here)
    tensor = to_tensor(tensor)
    new_shape = Nx.Shape.reshape(tensor.shape, shape_of(shape))
    names = Nx.Shape.named_axes!(opts[:names] || shape_names(shape), new_shape)

    if new_shape == tensor.shape do
      %T{tensor | names: names}
    else
      apply_op(:reshape, [tensor], %{}, tensor.type, new_shape, names)
    end
  end

  @doc type: :shape
  @doc """
  Gives a tensor new axis names, one per axis (`nil` for none); the data is not touched.

  ## Examples

      iex> Nx.rename(Nx.iota({2, 3}), [:x, nil])
      #Nx.Tensor<
        s64[x: 2][3]
        [
          [0, 1, 2],
          [3, 4, 5]
        ]
      >

      iex> Nx.rename(Nx.iota({2, 3}), [:x])
      ** (ArgumentError) invalid names for tensor of rank 2, when specifying names every dimension must have a name or be nil

  """
  def rename(tensor, names) do
    tensor = to_tensor(tensor)

    for {name, _} <- tensor.vectorized_axes, is_list(names) and name in names do
      raise ArgumentError, "name #{inspect(name)} is already a name for a vectorized axis"
    end

    %T{tensor | names: Nx.Shape.named_axes!(names, tensor.shape)}
  end

  @doc type: :shape
  @doc """
  Flattens the tensor to one axis, or merges the consecutive `:axes` into one (a scalar
  becomes `{1}`).

  ## Examples

      iex> Nx.flatten(Nx.iota({2, 2}))
      #Nx.Tensor<
        s64[4]
        [0, 1, 2, 3]
      >
      iex> Nx.flatten(Nx.iota({1, 2, 3}), axes: [1, 2]).shape
      {1, 6}

  """
  def flatten(tensor, opts \\ []) do
    tensor = to_tensor(tensor)
    opts = Keyword.validate!(opts, [:axes])
    dims = Tuple.to_list(tensor.shape)

    case opts[:axes] do
      nil ->
        reshape(tensor, {size(tensor)})

      axes ->
        axes = Enum.sort(Nx.Shape.normalize_axes(tensor.shape, axes, axis_names(tensor)))

        if axes == [] or axes != Enum.to_list(hd(axes)..List.last(axes)) do
          raise ArgumentError,
                "flatten axes must be consecutive"
        end

        {before, rest} = Enum.split(dims, hd(axes))
        {merged, later} = Enum.split(rest, length(axes))
        reshape(tensor, List.to_tuple(before ++ [Enum.product(merged)] ++ later))
    end
  end

  @doc type: :shape
  @doc """
  Repeats the tensor `repetitions[k]` times along axis `k`. A list shorter than the rank
  applies to the last axes; a longer one adds leading axes.

  ## Examples

      iex> Nx.tile(Nx.tensor([0, 1, 2]), [2])
      #Nx.Tensor<
        s64[6]
        [0, 1, 2, 0, 1, 2]
      >
      iex> Nx.tile(Nx.tensor([[1, 2], [3, 4]]), [2, 1])
      #Nx.Tensor<
        s64[4][2]
        [
          [1, 2],
          [3, 4],
          [1, 2],
          [3, 4]
        ]
      >

  """
  def tile(tensor, repetitions) do
    tensor = to_tensor(tensor)

    unless is_list(repetitions) and Enum.all?(repetitions, &(is_integer(&1) and &1 >= 1)) do
      raise ArgumentError,
            "repetitions must be a list of integers, got: #{inspect(repetitions)}"
    end

    dims = Tuple.to_list(tensor.shape)
    extra = length(repetitions) - length(dims)
    dims = List.duplicate(1, Kernel.max(extra, 0)) ++ dims
    reps = List.duplicate(1, Kernel.max(-extra, 0)) ++ repetitions

    # {d0, d1, ...} into {r0, d0, r1, d1, ...}, then each pair merged
    pairs = Enum.flat_map(Enum.zip(reps, dims), fn {r, d} -> [r, d] end)
    inner = Enum.map(0..(length(dims) - 1)//1, &(2 * &1 + 1))

    composite(
      fn t ->
        t
        |> reshape(List.to_tuple(dims))
        |> broadcast(List.to_tuple(pairs), axes: inner)
        |> reshape(List.to_tuple(Enum.zip_with(reps, dims, &(&1 * &2))))
      end,
      [tensor]
    )
  end

  @doc type: :shape
  @doc """
  Inserts an axis of size 1 at `axis` (negative counts from the end of the new shape).

  ## Examples

      iex> Nx.new_axis(Nx.tensor([1, 2]), -1)
      #Nx.Tensor<
        s64[2][1]
        [
          [1],
          [2]
        ]
      >

  """
  def new_axis(tensor, axis, name \\ nil) when is_atom(name) do
    tensor = to_tensor(tensor)
    shape = Nx.Shape.new_axis(tensor.shape, axis)
    position = if axis < 0, do: tuple_size(shape) + axis, else: axis
    names = Nx.Shape.new_axis_names(axis_names(tensor), position, name)
    apply_op(:reshape, [tensor], %{}, tensor.type, shape, names)
  end

  @doc type: :shape
  @doc """
  Removes axes of size 1: all of them, or the given `:axes` (each must have size 1).

  ## Examples

      iex> Nx.squeeze(Nx.tensor([[1, 2]]))
      #Nx.Tensor<
        s64[2]
        [1, 2]
      >

  """
  def squeeze(tensor, opts \\ []) do
    opts = keyword!(opts, [:axes])
    tensor = to_tensor(tensor)

    axes =
      case opts[:axes] do
        nil -> for {1, i} <- Enum.with_index(Tuple.to_list(tensor.shape)), do: i
        axes -> Nx.Shape.normalize_axes(tensor.shape, axes, axis_names(tensor))
      end

    shape = Nx.Shape.squeeze(tensor.shape, axes)

    if shape == tensor.shape do
      tensor
    else
      names = Nx.Shape.reduce_names(axis_names(tensor), axes, false)
      apply_op(:reshape, [tensor], %{}, tensor.type, shape, names)
    end
  end

  @doc type: :indexed
  @doc """
  Splits the tensor in two along `:axis` (0 by default): `split` is the size of the first
  part (a negative integer counts from the end) or, as a float, the fraction of the axis it
  takes (rounded up). Returns `{first, second}`.

  ## Examples

      iex> {a, b} = Nx.split(Nx.tensor([1, 2, 3, 4]), -1)
      iex> {Nx.to_flat_list(a), Nx.to_flat_list(b)}
      {[1, 2, 3], [4]}
      iex> {a, b} = Nx.split(Nx.iota({3, 4}), 0.75, axis: 1)
      iex> {a.shape, b.shape}
      {{3, 3}, {3, 1}}

  """
  def split(tensor, split, opts \\ []) do
    tensor = to_tensor(tensor)
    opts = keyword!(opts, axis: 0)
    axis = Nx.Shape.normalize_axis(tensor.shape, opts[:axis], axis_names(tensor))
    size = elem(tensor.shape, axis)

    first =
      cond do
        is_integer(split) and split < 0 -> size + split
        is_integer(split) -> split
        is_float(split) -> Kernel.ceil(split * size)
        true -> raise ArgumentError, "split must be an integer or a float, got: #{inspect(split)}"
      end

    # Nx 0.7.2's wording (its float rule reads: 0 < ceil(split * axis_size) < axis_size)
    cond do
      first > 0 and first < size ->
        :ok

      is_float(split) ->
        raise ArgumentError,
              "split must be a float such that 0 < split and ceil(split * axis_size) < 1"

      true ->
        raise ArgumentError,
              "split must be an integer greater than zero and less than the length of the " <>
                "given axis"
    end

    composite(
      fn t ->
        {slice_along_axis(t, 0, first, axis: axis),
         slice_along_axis(t, first, size - first, axis: axis)}
      end,
      [tensor]
    )
  end

  @doc type: :shape
  @doc """
  Broadcasts a tensor or number to `shape` (a tuple or a tensor). Input axis `k` goes to
  output axis `axes[k]`; by default the input is aligned to the trailing axes.

  ## Examples

      iex> Nx.broadcast(Nx.tensor([1, 2]), {2, 2})
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 2],
          [1, 2]
        ]
      >

      iex> Nx.broadcast(Nx.tensor([1, 2]), {2, 2}, axes: [0])
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 1],
          [2, 2]
        ]
      >

  """
  def broadcast(tensor, shape_arg, opts \\ []) do
    opts = keyword!(opts, [:axes, :names])
    tensor = to_tensor(tensor)
    shape = Nx.Shape.validate!(shape_of(shape_arg))

    # as in Nx, the result is named by `:names` or by a shape given as a tensor, not by the
    # input; named `:axes` are looked up in the input's names
    names = Nx.Shape.named_axes!(opts[:names] || shape_names(shape_arg), shape)

    axes =
      case opts[:axes] do
        nil -> Nx.Shape.broadcast_axes(tensor.shape, shape)
        axes -> Nx.Shape.normalize_axes(shape, axes, axis_names(tensor))
      end

    Nx.Shape.broadcast(tensor.shape, shape, axes)

    if shape == tensor.shape and opts[:axes] == nil do
      %T{tensor | names: names}
    else
      apply_op(:broadcast, [tensor], %{axes: axes}, tensor.type, shape, names)
    end
  end

  @doc type: :shape
  @doc """
  Pads a tensor with the scalar `pad_value`. `padding_config` has one `{low, high, interior}`
  per axis: `low`/`high` elements before/after (negative values remove elements), `interior`
  elements between every two. The output type merges the tensor's and the pad value's.

  ## Examples

      iex> Nx.pad(Nx.tensor([1, 2, 3]), 0, [{1, 2, 0}])
      #Nx.Tensor<
        s64[6]
        [0, 1, 2, 3, 0, 0]
      >

      iex> Nx.pad(Nx.tensor([1, 2, 3]), 0, [{-1, 0, 1}])
      #Nx.Tensor<
        s64[4]
        [0, 2, 0, 3]
      >

  """
  def pad(tensor, pad_value, padding_config) do
    {tensor, pad_value, type} = binary_args(tensor, pad_value)

    if pad_value.shape != {} do
      raise ArgumentError, "padding value must be a scalar and non-vectorized"
    end

    shape = Nx.Shape.pad(tensor.shape, padding_config)
    opts = %{padding_config: padding_config}
    inputs = [as_type(tensor, type), as_type(pad_value, type)]
    apply_op(:pad, inputs, opts, type, shape, axis_names(tensor))
  end

  @doc type: :ndim
  @doc """
  Pads each axis by periodic reflection of the tensor: `:padding_config` (required) has one
  `{before, after}` per axis, non-negative counts of elements added before and after. The
  tensor is mirrored about its first and last element (which are not repeated), as often as
  the counts need; an axis of size 1 repeats its element. Axis names are kept; for vectorized
  tensors the configuration is for the non-vectorized axes. See also `pad/3`.

  ## Examples

      iex> Nx.reflect(Nx.tensor([0, 1, 2]), padding_config: [{3, 1}])
      #Nx.Tensor<
        s64[7]
        [1, 2, 1, 0, 1, 2, 1]
      >

      iex> Nx.reflect(Nx.tensor([[0.5, 1.5]], names: [:x, :y]), padding_config: [{1, 1}, {0, 2}])
      #Nx.Tensor<
        f32[x: 3][y: 4]
        [
          [0.5, 1.5, 0.5, 1.5],
          [0.5, 1.5, 0.5, 1.5],
          [0.5, 1.5, 0.5, 1.5]
        ]
      >

      iex> Nx.reflect(Nx.tensor([0, 1]), padding_config: [{-1, 0}])
      ** (ArgumentError) expected padding config for axis 0 to be of the format {left, right}, with left and right as non-negative integers, got: {-1, 0}

  """
  def reflect(tensor, opts \\ []) do
    opts = keyword!(opts, [:padding_config])
    tensor = to_tensor(tensor)

    config =
      opts[:padding_config] || raise ArgumentError, "missing mandatory option :padding_config"

    rank = tuple_size(tensor.shape)

    if rank == 0, do: raise(ArgumentError, "expected tensor to have rank greater than 0")

    if not is_list(config) or length(config) != rank do
      raise ArgumentError, "expected to have one padding_config entry each tensor axis"
    end

    # for each padded axis, the position in the tensor of each output position
    takes =
      config
      |> Enum.with_index()
      |> Enum.flat_map(fn
        {{before, after_}, axis}
        when is_integer(before) and before >= 0 and is_integer(after_) and after_ >= 0 ->
          n = elem(tensor.shape, axis)
          positions = reflected_positions(n, before, after_)
          if before + after_ == 0, do: [], else: [{axis, tensor(positions)}]

        {padding, axis} ->
          raise ArgumentError,
                "expected padding config for axis #{axis} to be of the format {left, right}, " <>
                  "with left and right as non-negative integers, got: #{inspect(padding)}"
      end)

    names = axis_names(tensor)

    composite(
      fn t ->
        takes
        |> Enum.reduce(t, fn {axis, positions}, t -> take(t, positions, axis: axis) end)
        |> rename(names)
      end,
      [tensor]
    )
  end

  # Reflection repeats with period 2 * (n - 1): position p maps to p mod that period, folded
  # back into 0..n-1.
  defp reflected_positions(1, before, after_), do: List.duplicate(0, before + 1 + after_)

  defp reflected_positions(n, before, after_) do
    period = 2 * (n - 1)

    for p <- -before..(n - 1 + after_) do
      i = Integer.mod(p, period)
      if i < n, do: i, else: period - i
    end
  end

  @doc type: :shape
  @doc """
  Permutes the axes: output axis `k` is input axis `axes[k]`. By default the axes are
  reversed.

  ## Examples

      iex> Nx.transpose(Nx.tensor([[1, 2, 3], [4, 5, 6]]))
      #Nx.Tensor<
        s64[3][2]
        [
          [1, 4],
          [2, 5],
          [3, 6]
        ]
      >

  """
  def transpose(tensor, opts \\ []) do
    opts = keyword!(opts, [:axes])
    tensor = to_tensor(tensor)
    rank = tuple_size(tensor.shape)
    axes = opts[:axes] || Enum.to_list((rank - 1)..0//-1)
    names = axis_names(tensor)
    shape = Nx.Shape.transpose(tensor.shape, axes, names)
    axes = Nx.Shape.normalize_axes(tensor.shape, axes, names)

    if axes == Enum.to_list(0..(rank - 1)//1) do
      tensor
    else
      names = Nx.Shape.transpose_names(names, axes)
      apply_op(:transpose, [tensor], %{axes: axes}, tensor.type, shape, names)
    end
  end

  @doc type: :ndim
  @doc """
  Reverses the order of the elements along `:axes` (all axes by default).

  ## Examples

      iex> Nx.reverse(Nx.tensor([[1, 2, 3], [4, 5, 6]]), axes: [1])
      #Nx.Tensor<
        s64[2][3]
        [
          [3, 2, 1],
          [6, 5, 4]
        ]
      >

  """
  def reverse(tensor, opts \\ []) do
    opts = keyword!(opts, [:axes])
    tensor = to_tensor(tensor)
    rank = tuple_size(tensor.shape)

    axes =
      Nx.Shape.normalize_axes(
        tensor.shape,
        opts[:axes] || Enum.to_list(0..(rank - 1)//1),
        axis_names(tensor)
      )

    if axes == [] do
      tensor
    else
      apply_op(
        :reverse,
        [tensor],
        %{axes: Enum.sort(axes)},
        tensor.type,
        tensor.shape,
        axis_names(tensor)
      )
    end
  end

  @doc type: :ndim
  @doc """
  Joins tensors along `:axis` (0 by default); all other dimensions must be equal. The
  output type merges all input types.

  ## Examples

      iex> Nx.concatenate([Nx.tensor([1, 2]), Nx.tensor([3])])
      #Nx.Tensor<
        s64[3]
        [1, 2, 3]
      >

  """
  def concatenate(tensors, opts \\ [])

  def concatenate(tensors, opts), do: concatenate_list(tensor_list(tensors), opts)

  defp concatenate_list([], _opts),
    do: raise(ArgumentError, "no tensors were given to concatenate")

  defp concatenate_list([tensor], opts) do
    keyword!(opts, axis: 0)
    to_tensor(tensor)
  end

  defp concatenate_list(tensors, opts) do
    opts = keyword!(opts, axis: 0)
    tensors = Enum.map(tensors, &to_tensor/1)
    [first | _] = tensors
    axis = Nx.Shape.normalize_axis(first.shape, Keyword.get(opts, :axis, 0), axis_names(first))
    shape = Nx.Shape.concatenate(Enum.map(tensors, & &1.shape), axis)
    type = tensors |> Enum.map(& &1.type) |> Enum.reduce(&Nx.Type.merge/2)
    names = Nx.Shape.concatenate_names(Enum.map(tensors, &axis_names/1), axis)
    apply_op(:concatenate, tensors, %{axis: axis}, type, shape, names)
  end

  @doc type: :ndim
  @doc """
  Joins tensors of the same shape along a new axis `:axis` (0 by default; negative counts
  from the end of the output). The output type merges all input types.

  ## Examples

      iex> Nx.stack([Nx.tensor([1, 2]), Nx.tensor([3, 4])], axis: 1)
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 3],
          [2, 4]
        ]
      >

  """
  def stack(tensors, opts \\ []) do
    opts = keyword!(opts, axis: 0, name: nil)
    axis = Keyword.get(opts, :axis, 0)

    tensors
    |> tensor_list()
    |> Enum.map(&new_axis(to_tensor(&1), axis, opts[:name]))
    |> concatenate(axis: axis)
  end

  # What stack/2 and concatenate/2 take: a list whose elements may be containers, or one
  # container; its tensors in order (a lazy container's are made; a map's are in the order
  # of its sorted keys, which the caller is warned not to rely on)
  defp tensor_list(tensors) do
    tensors
    |> List.wrap()
    |> Enum.flat_map(fn
      %T{} = tensor ->
        [tensor]

      boolean when is_boolean(boolean) ->
        # (they were dropped without a word)
        raise Protocol.UndefinedError,
          protocol: Nx.LazyContainer,
          value: boolean,
          description:
            "booleans are not valid tensors (and therefore not supported as defn inputs). " <>
              "However, you can convert them to tensors using Nx.tensor/1"

      other ->
        if is_map(other) and not is_struct(other) do
          IO.warn(
            "a map has been given to stack/concatenate: its tensors are taken in the order " <>
              "of its sorted keys, which a map does not promise; give a list or a tuple"
          )
        end

        other
        |> Nx.Defn.Composite.expand_lazy(fn _template, make -> to_tensor(make.()) end)
        |> Nx.Defn.Composite.container!("expected tensors, numbers or containers of them")
        |> then(&Nx.Defn.Composite.flatten_list([&1]))
    end)
  end

  ## Introspection

  @doc type: :type
  @doc """
  The type of a tensor or number.

  ## Examples

      iex> Nx.type(Nx.tensor([1.0]))
      {:f, 32}
      iex> Nx.type(1)
      {:s, 64}

  """
  def type(%T{type: type}), do: type
  def type(number), do: Nx.Type.infer(number)

  @doc type: :shape
  @doc """
  Whether two tensors (or containers of tensors, numbers counting as scalar tensors) have
  the same structure and, leaf by leaf, the same type, shape and vectorized axes, and axis
  names that agree (an unnamed axis agrees with any name). The structure is compared as
  `Nx.Defn.Composite.compatible?/3` does (the fields a struct keeps out of its container do
  not count).

  ## Examples

      iex> Nx.compatible?(Nx.iota({2}), Nx.tensor([5, 6]))
      true
      iex> Nx.compatible?({Nx.iota({2})}, {Nx.iota({2}, type: :f32)})
      false
      iex> Nx.compatible?(Nx.iota({2}, names: [:x]), Nx.iota({2}))
      true
      iex> Nx.compatible?(Nx.iota({2}, names: [:x]), Nx.iota({2}, names: [:y]))
      false

  """
  def compatible?(left, right) do
    Nx.Defn.Composite.compatible?(
      left,
      right,
      &compatible_leaves?(to_template(&1), to_template(&2))
    )
  end

  # the same type, shape and vectorized axes, and names that agree where both are given
  defp compatible_leaves?(
         %T{type: type, shape: shape, vectorized_axes: axes} = left,
         %T{type: type, shape: shape, vectorized_axes: axes} = right
       ) do
    Enum.zip_with(axis_names(left), axis_names(right), &(&1 == nil or &2 == nil or &1 == &2))
    |> Enum.all?()
  end

  defp compatible_leaves?(_left, _right), do: false

  @doc type: :shape
  @doc """
  The shape of a tensor or number (a shape tuple is returned as it is).

  ## Examples

      iex> Nx.shape(Nx.tensor([[1, 2, 3], [4, 5, 6]]))
      {2, 3}
      iex> Nx.shape(1)
      {}

  """
  def shape(%T{shape: shape}), do: shape
  def shape(shape) when is_tuple(shape), do: Nx.Shape.validate!(shape)
  def shape(number) when is_number(number), do: {}

  def shape(other) do
    raise ArgumentError,
          "expected a shape. A shape is a n-element tuple with the size of each dimension. " <>
            "Alternatively, you can pass a tensor (or a number) and the shape will be " <>
            "retrieved from the tensor. Got: #{inspect(other)}"
  end

  @doc type: :shape
  @doc """
  The number of dimensions.

  ## Examples

      iex> Nx.rank(Nx.tensor([[1, 2], [3, 4]]))
      2
      iex> Nx.rank(1)
      0

  """
  def rank(shape) when is_tuple(shape), do: tuple_size(shape)
  def rank(tensor), do: tuple_size(shape(tensor))

  @doc type: :shape
  @doc """
  The size of one axis (negative axes count from the end).

  ## Examples

      iex> Nx.axis_size(Nx.tensor([[1, 2, 3], [4, 5, 6]]), -1)
      3

  """
  def axis_size(tensor, axis) do
    shape = shape(tensor)
    elem(shape, Nx.Shape.normalize_axis(shape, axis, names_or_nil(tensor)))
  end

  defp names_or_nil(%T{} = tensor), do: axis_names(tensor)
  defp names_or_nil(_shape_or_number), do: nil

  @doc type: :shape
  @doc """
  The index of `axis` in a tensor (or shape): negative axes count from the end. Axis names
  are not supported.

  ## Examples

      iex> Nx.axis_index(Nx.iota({2, 3, 4}), -1)
      2

  """
  def axis_index(tensor, axis),
    do: Nx.Shape.normalize_axis(shape(tensor), axis, names_or_nil(tensor))

  @doc type: :shape
  @doc """
  The number of elements.

  ## Examples

      iex> Nx.size(Nx.tensor([[1, 2, 3], [4, 5, 6]]))
      6

  """
  # a shape tuple is taken as it is, unchecked (as Nx 0.7.2: Nx.size({2, 0}) is 0)
  def size(shape) when is_tuple(shape), do: Nx.Shape.size(shape)
  def size(tensor), do: Nx.Shape.size(shape(tensor))

  @doc type: :shape
  @doc """
  The number of elements, vectorized axes included (`size/1` counts the inner shape only).

  ## Examples

      iex> Nx.flat_size(Nx.vectorize(Nx.iota({2, 3}), :x))
      6

  """
  def flat_size(tensor) do
    tensor = to_tensor(tensor)
    Enum.reduce(tensor.vectorized_axes, size(tensor), fn {_name, n}, acc -> acc * n end)
  end

  @doc type: :shape
  @doc """
  The size of the tensor's data in bytes: its elements (vectorized axes included) times the
  byte width of its type.

  ## Examples

      iex> Nx.byte_size(Nx.tensor([[1, 2, 3], [4, 5, 6]]))
      48
      iex> Nx.byte_size(Nx.tensor([1, 2, 3], type: :f32))
      12
      iex> Nx.byte_size(1)
      8

  """
  def byte_size(tensor) do
    tensor = to_tensor(tensor)
    vectorized = tensor.vectorized_axes |> Keyword.values() |> Enum.product()
    size(tensor) * vectorized * Nx.Type.byte_size(tensor.type)
  end

  @doc type: :shape
  @doc """
  The axes of a tensor, a shape or a number: `[0, 1, ..., rank - 1]`.

  ## Examples

      iex> Nx.axes(Nx.iota({2, 3}))
      [0, 1]
      iex> Nx.axes({1, 2, 3})
      [0, 1, 2]
      iex> Nx.axes(1)
      []

  """
  def axes(shape_or_tensor), do: Enum.to_list(0..(tuple_size(shape(shape_or_tensor)) - 1)//1)

  @doc type: :shape
  @doc """
  The axis names of a tensor, one per axis (`nil` for an unnamed axis).

  Names are given with the `:names` option of the creation functions and of `reshape/3` and
  `broadcast/3`, changed with `rename/2`, and carried through operations (see
  docs/COMPATIBILITY.md for the ops that keep them). Wherever an axis is expected, a name
  may be given instead.

  ## Examples

      iex> Nx.names(Nx.tensor([[1, 2, 3], [4, 5, 6]], names: [:x, :y]))
      [:x, :y]
      iex> Nx.names(Nx.tensor([1, 2]))
      [nil]
      iex> Nx.names(1)
      []

  """
  def names(%T{} = tensor), do: axis_names(tensor)
  def names(number) when is_number(number), do: []
  def names(other), do: names(to_tensor(other))

  ## Backends

  @process_backend {Nx, :default_backend}
  @global_backend {Nx, :global_default_backend}

  @doc type: :backend
  @doc """
  The backend of new results in this process, as `{module, options}`: the one set by
  `default_backend/1` (or `with_default_backend/2`) in this process, else the global one
  (`config :nx, default_backend: ...`, `{Nx.BinaryBackend, []}` unless configured, or
  `global_default_backend/1`).

  `Nx.BinaryBackend` keeps results in Elixir memory; `NxJax.Backend` keeps them resident on a
  worker.

  The global default is read from the application environment once, at the first call that
  needs it, and kept (every call of a jitted function reads it): after changing it with
  `Application.put_env/3` at run time, call `global_default_backend/1` with the new value.

  ## Examples

      iex> Nx.default_backend()
      {Nx.BinaryBackend, []}

  """
  def default_backend do
    Process.get(@process_backend) || global_backend()
  end

  @doc type: :backend
  @doc """
  Sets the backend of new results in this process (a module, or `{module, options}`) and
  returns the previous one as `{module, options}` (see `default_backend/0`). Other processes
  keep theirs: in an application, prefer `config :nx, default_backend: ...`.

  ## Examples

      iex> previous = Nx.default_backend({NxJax.Backend, []})
      iex> Nx.default_backend()
      {NxJax.Backend, []}
      iex> Nx.default_backend(previous)
      {NxJax.Backend, []}
      iex> Nx.default_backend()
      {Nx.BinaryBackend, []}

  """
  def default_backend(backend) do
    Process.put(@process_backend, default_backend!(backend)) || global_backend()
  end

  @doc type: :backend
  @doc """
  Sets the backend of new results in every process that has not set its own (see
  `default_backend/1`) and returns the previous global one as `{module, options}`.

  It is kept in the application environment, as `config :nx, default_backend: ...` sets it.
  Meant for scripts and notebooks; an application sets it in its config files.
  """
  def global_default_backend(backend) do
    backend = default_backend!(backend)
    previous = global_backend()
    Application.put_env(:nx, :default_backend, backend)
    :persistent_term.put(@global_backend, backend)
    previous
  end

  # the global default: the application environment's, checked and kept in :persistent_term
  # at the first read (global_default_backend/1 writes both), as Nx.Defn keeps its default
  # options: jitted calls read it, and a lookup of the environment costs more
  defp global_backend do
    case :persistent_term.get(@global_backend, nil) do
      nil ->
        backend =
          case Application.fetch_env(:nx, :default_backend) do
            {:ok, configured} -> configured
            :error -> Nx.BinaryBackend
          end

        backend = default_backend!(backend)
        :persistent_term.put(@global_backend, backend)
        backend

      backend ->
        backend
    end
  end

  @doc type: :backend
  @doc """
  Runs `fun` (no arguments) with `backend` as this process's default backend (see
  `default_backend/1`), and returns what it returns; the previous default is back
  afterwards, also when `fun` raises. `backend` is a module or `{module, options}`.

  ## Examples

      iex> Nx.with_default_backend(NxJax.Backend, fn -> Nx.default_backend() end)
      {NxJax.Backend, []}
      iex> Nx.default_backend()
      {Nx.BinaryBackend, []}

  """
  def with_default_backend(backend, fun) do
    previous = Process.put(@process_backend, default_backend!(backend))

    try do
      fun.()
    after
      if previous,
        do: Process.put(@process_backend, previous),
        else: Process.delete(@process_backend)
    end
  end

  # `{module, options}` of a backend given as a module or as that pair (Nx's message else)
  defp backend!(backend) when is_atom(backend), do: {backend, []}
  defp backend!({backend, opts}) when is_atom(backend) and is_list(opts), do: {backend, opts}

  defp backend!(other) do
    raise ArgumentError,
          "backend must be an atom or a tuple {backend, options}, got: #{inspect(other)}"
  end

  # a default backend, as `{module, options}` of a module that exists, so that a misspelt or
  # missing one (EXLA.Backend here) fails where it is set rather than being ignored (Nx 0.7.2
  # calls the module's init/1 there; modules that are not an Nx.Backend, as Nx.Defn.Expr,
  # are taken as in Nx)
  defp default_backend!(backend) do
    {module, _opts} = backend = backend!(backend)

    unless Code.ensure_loaded?(module) do
      raise ArgumentError,
            "unknown backend #{inspect(module)}: no such module is loaded (tensors live in " <>
              "Nx.BinaryBackend, Elixir memory, or in an Nx.Backend that keeps them " <>
              "elsewhere: is its application among your dependencies?)"
    end

    backend
  end

  @doc type: :backend
  @doc """
  Moves the tensors of `tensor_or_container` to `backend` (default `Nx.BinaryBackend`): a
  resident tensor (`NxJax.Backend`) is fetched and freed on its worker; `NxJax.Backend` as
  the target makes tensors resident.

  ## Examples

      iex> Nx.backend_transfer(Nx.tensor([1, 2]))
      #Nx.Tensor<
        s64[2]
        [1, 2]
      >

  """
  def backend_transfer(tensor_or_container, backend \\ Nx.BinaryBackend) do
    Nx.Defn.Composite.traverse(
      container!(tensor_or_container),
      &backend_of(&1, backend).transfer(to_tensor(&1), backend)
    )
  end

  @doc type: :backend
  @doc """
  Copies the tensors of `tensor_or_container` to `backend` (default `Nx.BinaryBackend`); a
  resident source stays resident.
  """
  def backend_copy(tensor_or_container, backend \\ Nx.BinaryBackend) do
    Nx.Defn.Composite.traverse(
      container!(tensor_or_container),
      &backend_of(&1, backend).copy(to_tensor(&1), backend)
    )
  end

  # The module that moves a tensor to `target`: its own backend when its data lives elsewhere
  # (an `Nx.Backend`), else the target's (Nx.BinaryBackend for a binary tensor staying one).
  defp backend_of(%T{data: %source{}}, _target)
       when source not in [Nx.BinaryBackend, Nx.Defn.Expr],
       do: source

  defp backend_of(_tensor_or_number, target) do
    case target do
      {module, opts} when is_atom(module) and is_list(opts) ->
        backend_of(nil, module)

      Nx.BinaryBackend ->
        Nx.BinaryBackend

      module when is_atom(module) ->
        if(Nx.Backend.backend?(module), do: module, else: unknown!(module))

      other ->
        unknown!(other)
    end
  end

  defp unknown!(backend) do
    raise ArgumentError,
          "unknown backend #{inspect(backend)}: tensors live in Nx.BinaryBackend (Elixir " <>
            "memory) or in a backend that keeps them elsewhere (an Nx.Backend)"
  end

  defp deallocate(%T{data: %backend{}} = tensor)
       when backend not in [Nx.BinaryBackend, Nx.Defn.Expr],
       do: backend.deallocate(tensor)

  defp deallocate(_tensor), do: :already_deallocated

  defp container!(data),
    do: Nx.Defn.Composite.container!(data, "expected a tensor, a number or a container of them")

  @doc type: :backend
  @doc """
  Frees the data of a resident tensor (or of each tensor of a container) on its worker: `:ok`,
  or `:already_deallocated` for a single tensor that was not resident (tensors in Elixir memory
  are freed by the garbage collector).
  """
  def backend_deallocate(%T{} = tensor), do: deallocate(tensor)

  def backend_deallocate(container) do
    for %T{} = tensor <- Nx.Defn.Composite.flatten_list([container!(container)]),
        do: deallocate(tensor)

    :ok
  end

  ## Vectorization

  @doc type: :shape
  @doc """
  Turns leading axes of `tensor` into vectorized axes: every operation then works on each
  entry independently ("for each" semantics), and `shape/1` no longer counts them.

  `name_or_axes` is a name (the first axis), a list of names (one leading axis each) or a
  keyword list `name: size` (the sizes must match the leading axes). Axes already vectorized
  stay in front of the new ones.

  Vectorized axes of different inputs of an operation are matched by name: inputs
  vectorized over `:x` and over `:y` give a result vectorized over both, `[x: ..., y: ...]`
  (names in the order they first appear); the same name must have the same size in every
  input. Axis options (`axes:`, `axis:`) and shapes refer to the non-vectorized shape.

  ## Examples

      iex> v = Nx.vectorize(Nx.tensor([[1, 2, 3], [4, 5, 6]]), :x)
      #Nx.Tensor<
        vectorized[x: 2]
        s64[3]
        [
          [1, 2, 3],
          [4, 5, 6]
        ]
      >
      iex> Nx.sum(v)
      #Nx.Tensor<
        vectorized[x: 2]
        s64
        [6, 15]
      >

  """
  def vectorize(tensor, name_or_axes, opts \\ [])

  def vectorize(tensor, name, opts) when is_atom(name) and name != nil,
    do: vectorize(tensor, [name], opts)

  def vectorize(data, axes, opts) when is_list(axes) and is_list(opts) do
    if container?(data),
      do: each_tensor(data, &vectorize_tensor(&1, axes, opts)),
      else: vectorize_tensor(data, axes, opts)
  end

  defp vectorize_tensor(tensor, axes, opts) do
    %T{} = tensor = to_tensor(tensor)
    Keyword.validate!(opts, [])
    dims = Tuple.to_list(tensor.shape)

    cond do
      axes == [] ->
        :ok

      dims == [] ->
        raise ArgumentError, "cannot vectorize tensor of rank 0"

      length(axes) > length(dims) ->
        raise ArgumentError, "number of vectorized axes must not be greater than the shape size"

      true ->
        :ok
    end

    {leading, inner} = Enum.split(dims, length(axes))

    new =
      Enum.zip_with(axes, leading, fn
        {name, size}, dim when is_atom(name) and size === dim ->
          {name, dim}

        {name, size}, dim when is_atom(name) and is_integer(size) ->
          raise ArgumentError,
                "expected vectorized axis #{inspect(name)} to have size #{size}, got #{dim}"

        name, dim when is_atom(name) and name != nil ->
          {name, dim}

        other, _dim ->
          raise ArgumentError,
                "expected vectorized axis specification to be an atom or a tuple of " <>
                  "{atom, pos_integer}, got: #{inspect(other)}"
      end)

    inner_names = Enum.drop(axis_names(tensor), length(axes))

    for {name, _} <- new, name in inner_names do
      raise ArgumentError,
            "cannot use name #{inspect(name)} for new vectorized axes because there's " <>
              "already an axis with the same name"
    end

    for {name, _} <- new, Keyword.has_key?(tensor.vectorized_axes, name) do
      raise ArgumentError,
            "cannot use name #{inspect(name)} for new vectorized axes because there's " <>
              "already a vectorized axis with the same name"
    end

    # Nx 0.7.2 accepts a name twice among the new axes; we refuse it
    vectorized_axes = tensor.vectorized_axes ++ new
    unique_axis_names!(vectorized_axes)

    # the axes left keep their names
    %T{
      tensor
      | shape: List.to_tuple(inner),
        vectorized_axes: vectorized_axes,
        names: inner_names
    }
  end

  @doc type: :shape
  @doc """
  Turns the vectorized axes of `tensor` back into leading axes (outermost first).

  ## Options

    * `:keep_names` - name the new leading axes after the vectorized axes (`true`, the
      default) or leave them unnamed (`false`)

  ## Examples

      iex> v = Nx.vectorize(Nx.tensor([[1, 2], [3, 4]]), :x)
      iex> Nx.devectorize(v, keep_names: false) == Nx.tensor([[1, 2], [3, 4]])
      true
      iex> Nx.devectorize(v).names
      [:x, nil]

  """
  def devectorize(data, opts \\ []) do
    if container?(data),
      do: each_tensor(data, &devectorize_tensor(&1, opts)),
      else: devectorize_tensor(data, opts)
  end

  defp devectorize_tensor(tensor, opts) do
    %T{} = tensor = to_tensor(tensor)
    opts = keyword!(opts, keep_names: true)
    {names, sizes} = Enum.unzip(tensor.vectorized_axes)
    leading = if opts[:keep_names], do: names, else: Enum.map(names, fn _ -> nil end)

    %T{
      tensor
      | shape: List.to_tuple(sizes ++ Tuple.to_list(tensor.shape)),
        names: leading ++ tensor.names,
        vectorized_axes: []
    }
  end

  # a tuple, a map, a struct deriving Nx.Container or implementing Nx.LazyContainer (not a
  # tensor or a number)
  defp container?(data) when is_tuple(data), do: true
  defp container?(data) when is_map(data) and not is_struct(data), do: true

  defp container?(data)
       when is_struct(data) and not is_struct(data, T) and not is_struct(data, Complex),
       do:
         Nx.Container.impl_for(data) not in [nil, Nx.Container.Any] or
           Nx.LazyContainer.impl_for(data) != Nx.LazyContainer.Any

  defp container?(_data), do: false

  # `fun` applied to each tensor of `container` (numbers as tensors, lazy containers made)
  defp each_tensor(container, fun) do
    container
    |> Nx.Defn.Composite.expand_lazy(fn _template, make -> make.() end)
    |> Nx.Defn.Composite.traverse(fn leaf -> fun.(to_tensor(leaf)) end)
  end

  @doc type: :vectorization
  @doc """
  Changes the vectorized axes and the shape of `tensor` at once, keeping its elements in
  row-major order: `vectorized_axes` is a keyword list `name: size` and `:target_shape` the
  new non-vectorized shape (by default the tensor's shape and names stay), `:target_names`
  its names. One size, among the vectorized axes and `:target_shape`, may be `:auto`: it is
  computed from the number of elements, which must stay the same. A container (tuple, map)
  is revectorized tensor by tensor.

  ## Examples

      iex> t = Nx.vectorize(Nx.iota({2, 3}), :x)
      iex> r = Nx.revectorize(t, [a: 3, b: 2], target_shape: {})
      iex> {r.vectorized_axes, r.shape}
      {[a: 3, b: 2], {}}
      iex> Nx.revectorize(t, a: :auto).vectorized_axes
      [a: 2]

  """
  def revectorize(tensor, vectorized_axes, opts \\ [])

  def revectorize(%T{} = tensor, vectorized_axes, opts) when is_list(vectorized_axes) do
    opts = keyword!(opts, [:target_shape, :target_names])

    unless Keyword.keyword?(vectorized_axes) and
             Enum.all?(vectorized_axes, fn {_, size} ->
               size == :auto or (is_integer(size) and size > 0)
             end) do
      raise ArgumentError,
            "revectorize/3 expects a keyword list of name: size (a positive integer or " <>
              ":auto), got: " <> inspect(vectorized_axes)
    end

    unique_axis_names!(vectorized_axes)
    {names, sizes} = Enum.unzip(vectorized_axes)

    {target, target_names} =
      case opts[:target_shape] do
        nil ->
          {tensor.shape, tensor.names}

        shape when is_tuple(shape) ->
          {shape, opts[:target_names]}

        other ->
          raise ArgumentError, "expected :target_shape to be a tuple, got: #{inspect(other)}"
      end

    inner = sizes ++ Tuple.to_list(target)

    if Enum.count(inner, &(&1 == :auto)) > 1 do
      raise ArgumentError,
            "cannot have more than one `:auto` occurrence between target_axes and the " <>
              ":target_shape option"
    end

    inner_names =
      case target_names do
        nil -> nil
        target_names -> List.duplicate(nil, length(names)) ++ target_names
      end

    tensor
    |> devectorize(keep_names: false)
    |> reshape(List.to_tuple(inner), names: inner_names)
    |> vectorize(names)
  end

  def revectorize(number, vectorized_axes, opts) when is_number(number),
    do: revectorize(to_tensor(number), vectorized_axes, opts)

  def revectorize(container, vectorized_axes, opts) do
    if container?(container),
      do: each_tensor(container, &revectorize(&1, vectorized_axes, opts)),
      else: revectorize(to_tensor(container), vectorized_axes, opts)
  end

  @doc type: :vectorization
  @doc """
  Gives every tensor of the list `tensors` the same vectorized axes by name, without growing
  any: their union, in order of first appearance, where each tensor keeps its own sizes and
  gets size 1 for the names it lacks. Two tensors may share a name when its sizes are equal
  or one is 1. With `align_ranks: true` (and some tensor vectorized) each inner shape gets
  leading axes of size 1 up to the largest rank of the list. A list of one tensor comes back
  as it is. `broadcast_vectors/2` also grows the size-1 axes.

  ## Examples

      iex> x = Nx.vectorize(Nx.tensor([1, 2, 3]), :x)
      iex> y = Nx.vectorize(Nx.tensor([4]), :y)
      iex> [xv, yv] = Nx.reshape_vectors([x, y])
      iex> {xv.vectorized_axes, yv.vectorized_axes}
      {[x: 3, y: 1], [x: 1, y: 1]}
      iex> [yv, xv] = Nx.reshape_vectors([y, x])
      iex> {yv.vectorized_axes, xv.vectorized_axes}
      {[y: 1, x: 1], [y: 1, x: 3]}

      iex> y = Nx.vectorize(Nx.tensor([[[1], [1]], [[2], [2]], [[3], [3]]]), :y)
      iex> [one, _] = Nx.reshape_vectors([1, y], align_ranks: true)
      iex> one
      #Nx.Tensor<
        vectorized[y: 1]
        s64[1][1]
        [
          [
            [1]
          ]
        ]
      >

  """
  def reshape_vectors(tensors, opts \\ [])

  def reshape_vectors([tensor], _opts), do: [to_tensor(tensor)]

  def reshape_vectors(tensors, opts) when is_list(tensors) do
    opts = keyword!(opts, align_ranks: false)
    tensors = Enum.map(tensors, &to_tensor/1)

    case Nx.Defn.Expr.vectorized_union(tensors) do
      [] ->
        tensors

      axes ->
        rank = tensors |> Enum.map(&tuple_size(&1.shape)) |> Enum.max(fn -> 0 end)
        Enum.map(tensors, &broadcast_vector(&1, axes, opts[:align_ranks] && rank, false))
    end
  end

  @doc type: :vectorization
  @doc """
  Gives every tensor of the list `tensors` the same vectorized axes: their union by name, in
  order of first appearance, where a size-1 axis takes the size of a larger one of its name.
  Each tensor keeps its own (inner) shape, or with `align_ranks: true` gets leading axes of
  size 1 up to the largest rank of the list. A list of one tensor comes back as it is.

  ## Examples

      iex> x = Nx.vectorize(Nx.tensor([1, 2]), :x)
      iex> y = Nx.vectorize(Nx.tensor([[10, 20, 30]]), :y)
      iex> [bx, by] = Nx.broadcast_vectors([x, y])
      iex> {bx.vectorized_axes, by.vectorized_axes, bx.shape, by.shape}
      {[x: 2, y: 1], [x: 2, y: 1], {}, {3}}
      iex> Nx.devectorize(by, keep_names: false)
      #Nx.Tensor<
        s64[2][1][3]
        [
          [
            [10, 20, 30]
          ],
          [
            [10, 20, 30]
          ]
        ]
      >
      iex> [bx, _] = Nx.broadcast_vectors([x, y], align_ranks: true)
      iex> bx.shape
      {1}

  """
  def broadcast_vectors(tensors, opts \\ []) when is_list(tensors) do
    opts = keyword!(opts, align_ranks: false)
    tensors = Enum.map(tensors, &to_tensor/1)

    # (align_ranks only applies when some tensor is vectorized, as in Nx)
    case {tensors, Nx.Defn.Expr.vectorized_union(tensors)} do
      {[_], _} ->
        tensors

      {_, []} ->
        tensors

      {_, axes} ->
        rank = tensors |> Enum.map(&tuple_size(&1.shape)) |> Enum.max(fn -> 0 end)
        Enum.map(tensors, &broadcast_vector(&1, axes, opts[:align_ranks] && rank, true))
    end
  end

  # `tensor` with the vectorized axes `axes` (its own are among them, by name; a size-1 one
  # may grow) when `grow?`, else with the names of `axes` and its own sizes (1 for those it
  # lacks); its inner shape padded with leading 1s up to `rank` unless nil
  defp broadcast_vector(%T{vectorized_axes: own, shape: shape} = tensor, axes, rank, grow?) do
    inner = Tuple.to_list(shape)
    pad = if rank, do: rank - length(inner), else: 0
    inner = List.duplicate(1, pad) ++ inner

    ones =
      Enum.map(axes, fn {name, _} ->
        case Keyword.fetch(own, name) do
          {:ok, size} -> size
          :error -> 1
        end
      end)

    target = if grow?, do: axes, else: Enum.zip(Keyword.keys(axes), ones)

    if own == target and pad == 0 do
      tensor
    else
      # its own sizes in the order of `axes` (1 for those it lacks): as Nx 0.7.2, axes of
      # another order are reshaped into that order, not transposed
      data = tensor |> devectorize(keep_names: false) |> reshape(List.to_tuple(ones ++ inner))

      data =
        if grow?, do: broadcast(data, List.to_tuple(Keyword.values(axes) ++ inner)), else: data

      %T{vectorize(data, target) | names: List.duplicate(nil, pad) ++ axis_names(tensor)}
    end
  end

  @doc false
  # The shape of the data of a tensor: its vectorized sizes, then its shape.
  def full_shape(%T{vectorized_axes: [], shape: shape}), do: shape

  def full_shape(%T{vectorized_axes: axes, shape: shape}),
    do: List.to_tuple(Keyword.values(axes) ++ Tuple.to_list(shape))

  defp unique_axis_names!(vectorized_axes) do
    names = Keyword.keys(vectorized_axes)

    if length(Enum.uniq(names)) != length(names) do
      raise ArgumentError,
            "vectorized axis names must be unique, got: #{inspect(vectorized_axes)}"
    end
  end

  ## Element-wise binary ops (arithmetic and bitwise)

  # name: {description, type rule, the example's two arguments, its result's header and
  # values}. Type rules: `:merge` the merge of the input types; `:merge_real` the same, complex
  # inputs refused (they have no order); `:float` the merge made floating; `:integer` the merge
  # of integer types, floats refused with Nx's integer-only message.
  @binary_ops [
    add: {"Element-wise addition", :merge, "Nx.tensor([1, 2, 3])", "1", "s64[3]", "[2, 3, 4]"},
    subtract:
      {"Element-wise subtraction", :merge, "Nx.tensor([1, 2, 3])", "1", "s64[3]", "[0, 1, 2]"},
    multiply:
      {"Element-wise multiplication", :merge, "Nx.tensor([1, 2, 3])", "2", "s64[3]", "[2, 4, 6]"},
    pow: {"Element-wise power", :merge, "Nx.tensor([1, 2, 3])", "2", "s64[3]", "[1, 4, 9]"},
    remainder:
      {"Remainder of the division, with the sign of the dividend (as `rem/2` and C's fmod)",
       :merge_real, "Nx.tensor([5, -5, 7])", "3", "s64[3]", "[2, -2, 1]"},
    divide:
      {"Element-wise division (always floating)", :float, "Nx.tensor([1, 2, 3])", "2", "f32[3]",
       "[0.5, 1.0, 1.5]"},
    quotient:
      {"Integer division truncating toward zero (integer tensors only)", :integer,
       "Nx.tensor([7, -7, 9])", "2", "s64[3]", "[3, -3, 4]"},
    atan2:
      {"The angle of the point `(right, left)`: `atan(left / right)` in the right quadrant " <>
         "(complex tensors must hold real values: the result is `atan2` of the real parts, " <>
         "with a zero imaginary part; a nonzero imaginary part raises `ArithmeticError`, or " <>
         "gives `NaN+NaNi` inside `defn`, where values are not known)", :float,
       "Nx.tensor([1.0, -1.0])", "-1.0", "f32[2]", "[2.356194496154785, -2.356194496154785]"},
    max:
      {"Element-wise maximum", :merge_real, "Nx.tensor([1, 2, 3])", "2", "s64[3]", "[2, 2, 3]"},
    min:
      {"Element-wise minimum", :merge_real, "Nx.tensor([1, 2, 3])", "2", "s64[3]", "[1, 2, 2]"},
    # bitwise
    bitwise_and:
      {"Bitwise and (integer tensors only)", :integer, "Nx.tensor([12, 10])", "6", "s64[2]",
       "[4, 2]"},
    bitwise_or:
      {"Bitwise or (integer tensors only)", :integer, "Nx.tensor([12, 10])", "6", "s64[2]",
       "[14, 14]"},
    bitwise_xor:
      {"Bitwise exclusive or (integer tensors only)", :integer, "Nx.tensor([12, 10])", "6",
       "s64[2]", "[10, 12]"},
    left_shift:
      {"Shifts the bits of `left` to the left by `right` (integer tensors only)", :integer,
       "Nx.tensor([1, 3])", "2", "s64[2]", "[4, 12]"},
    right_shift:
      {"Shifts the bits of `left` to the right by `right` (arithmetic for signed types, " <>
         "logical for unsigned; integer tensors only)", :integer, "Nx.tensor([-8, 8])", "2",
       "s64[2]", "[-2, 2]"}
  ]

  for {name, {description, rule, left, right, header, result}} <- @binary_ops do
    type_doc =
      case rule do
        :float -> "The output type is the merge of the input types, made floating."
        :integer -> "The output type is the merge of the input types; floats raise."
        _merge -> "The output type is the merge of the input types."
      end

    # (a description that starts "Element-wise" is followed by what the op takes, and the
    # type rule gets a paragraph of its own)
    lead =
      if String.starts_with?(description, "Element-wise"),
        do: "#{description} of two tensors or numbers, with broadcasting.\n\n#{type_doc}",
        else: "#{description}, element-wise with broadcasting. #{type_doc}"

    @doc type: :element
    @doc """
    #{lead}

    ## Examples

        iex> Nx.#{name}(#{left}, #{right})
        #Nx.Tensor<
          #{header}
          #{result}
        >

    """
    def unquote(name)(left, right) do
      shift_amounts!(unquote(name), right)

      {left, right} =
        if unquote(name) == :quotient,
          do: {integer_grad_input(left), integer_grad_input(right)},
          else: {left, right}

      {left, right, type} = binary_args(left, right)
      # (atan2 of complex tensors is defined on their real parts, see its docs; the integer
      # ops refuse complex types with the integer-only message, as Nx does)
      if unquote(rule) == :merge_real, do: no_complex!(%T{left | type: type}, unquote(name), 2)
      if unquote(name) == :atan2 and Nx.Type.complex?(type), do: real_valued!([left, right])

      type =
        case unquote(rule) do
          :float -> Nx.Type.to_floating(type)
          :integer -> integer_only!(type, "#{unquote(name)}/2")
          merge when merge in [:merge, :merge_real] -> type
        end

      shape = Nx.Shape.binary_broadcast(left.shape, right.shape)
      apply_op(unquote(name), [left, right], %{}, type, shape, broadcast_names(left, right))
    end
  end

  # grad/2 traces an integer input as a float copy (see integer_tensor!/3); quotient of that
  # copy computes on the integer it was, as in Nx, and grad/2 refuses the gradient through it
  # with Nx's message
  defp integer_grad_input(
         %T{data: %Nx.Defn.Expr{op: :metadata, opts: %{metadata: %{integer_input: type}}}} = t
       ),
       do: as_type(t, type)

  defp integer_grad_input(tensor), do: tensor

  # Nx computes atan2 of complex tensors with Complex.atan2/2, which accepts only complex
  # numbers whose imaginary part is zero: the same check on the values of concrete tensors
  defp real_valued!(tensors) do
    for %T{type: {:c, bits}, data: data} = tensor <- tensors,
        not match?(%Nx.Defn.Expr{}, data),
        not zero_imaginary_parts?(to_binary(tensor), div(bits, 2)) do
      raise ArithmeticError, "Complex.atan2 only accepts real numbers as arguments"
    end

    :ok
  end

  # (a part is zero when its bits other than the sign are; NaN parts are not zero)
  defp zero_imaginary_parts?(<<>>, _part_bits), do: true

  defp zero_imaginary_parts?(binary, part_bits) do
    <<_re::size(part_bits), im::size(part_bits)-native, rest::binary>> = binary

    Bitwise.band(im, Bitwise.bsl(1, part_bits - 1) - 1) == 0 and
      zero_imaginary_parts?(rest, part_bits)
  end

  # Nx 0.7.2 refuses negative shift amounts. They are checked where they are known without
  # asking the worker: a number, or a signed tensor in Elixir memory (see
  # out_of_range_row/2); a traced or resident amount is shifted as JAX does.
  defp shift_amounts!(op, right) when op in [:left_shift, :right_shift] do
    negative =
      case right do
        n when is_integer(n) and n < 0 -> [n]
        %T{type: {:s, _} = type} = t -> out_of_range_row(t, {Nx.Type.max_finite(type) + 1})
        _ -> nil
      end

    if negative do
      word = if op == :left_shift, do: "left", else: "right"
      raise ArgumentError, "cannot #{word} shift by #{hd(negative)}"
    end

    :ok
  end

  defp shift_amounts!(_op, _right), do: :ok

  ## Comparisons, logical ops, select and clip

  @compare_ops [
    equal: {"==", "[0, 1, 0]"},
    not_equal: {"!=", "[1, 0, 1]"},
    less: {"<", "[1, 0, 0]"},
    less_equal: {"<=", "[1, 1, 0]"},
    greater: {">", "[0, 0, 1]"},
    greater_equal: {">=", "[0, 1, 1]"}
  ]

  for {name, {symbol, result}} <- @compare_ops do
    @doc type: :element
    @doc """
    Element-wise `#{symbol}` of two tensors or numbers, with broadcasting; returns a `u8`
    tensor of 0s and 1s.

    ## Examples

        iex> Nx.#{name}(Nx.tensor([1, 2, 3]), 2)
        #Nx.Tensor<
          u8[3]
          #{result}
        >

    """
    def unquote(name)(left, right) do
      {left, right} = compare_args(left, right)

      # (complex numbers have no order; equality is defined)
      if unquote(name) not in [:equal, :not_equal] do
        no_complex!(left, unquote(name), 2)
        no_complex!(right, unquote(name), 2)
      end

      shape = Nx.Shape.binary_broadcast(left.shape, right.shape)
      apply_op(unquote(name), [left, right], %{}, {:u, 8}, shape, broadcast_names(left, right))
    end
  end

  @logical_ops [
    logical_and: {"and", "[0, 0, 1]"},
    logical_or: {"or", "[1, 0, 1]"},
    logical_xor: {"exclusive or", "[1, 0, 0]"}
  ]

  for {name, {word, result}} <- @logical_ops do
    @doc type: :element
    @doc """
    Element-wise logical #{word} with broadcasting: nonzero elements are true. Returns a `u8`
    tensor of 0s and 1s.

    ## Examples

        iex> Nx.#{name}(Nx.tensor([1, 0, 2]), Nx.tensor([0, 0, 3.5]))
        #Nx.Tensor<
          u8[3]
          #{result}
        >

    """
    def unquote(name)(left, right) do
      {left, right} = {to_tensor(left), to_tensor(right)}
      shape = Nx.Shape.binary_broadcast(left.shape, right.shape)
      apply_op(unquote(name), [left, right], %{}, {:u, 8}, shape, broadcast_names(left, right))
    end
  end

  @doc type: :element
  @doc """
  Picks `on_true` where `pred` is nonzero and `on_false` elsewhere, with broadcasting.
  The output type merges the types of `on_true` and `on_false`.

  ## Examples

      iex> Nx.select(Nx.tensor([1, 0, 1], type: :u8), Nx.tensor([1, 2, 3]), 0)
      #Nx.Tensor<
        s64[3]
        [1, 0, 3]
      >

  """
  def select(pred, on_true, on_false) do
    pred = to_tensor(pred)
    # numbers become tensors of their own type first (s64, f32), as in Nx 0.7.2
    {on_true, on_false} = {to_tensor(on_true), to_tensor(on_false)}
    type = Nx.Type.merge(on_true.type, on_false.type)

    vectorized = Enum.any?([pred, on_true, on_false], &(&1.vectorized_axes != []))

    # as Nx 0.7.2: the shape of a non-scalar predicate, which each branch must broadcast to;
    # with a scalar one, the branches' broadcast shape
    shape =
      cond do
        pred.shape == {} or vectorized ->
          pred.shape
          |> Nx.Shape.binary_broadcast(on_true.shape)
          |> Nx.Shape.binary_broadcast(on_false.shape)

        true ->
          for branch <- [on_true, on_false] do
            axes = Nx.Shape.broadcast_axes(branch.shape, pred.shape)
            Nx.Shape.broadcast(branch.shape, pred.shape, axes)
          end

          pred.shape
      end

    # Nx's names: those of a non-scalar predicate, else the merge of the two branches'
    names =
      cond do
        pred.shape == {} -> broadcast_names(on_true, on_false)
        pred.shape == shape -> axis_names(pred)
        true -> nil
      end

    apply_op(:select, [pred, on_true, on_false], %{}, type, shape, names)
  end

  @doc type: :element
  @doc """
  Clips every element into `[min, max]` (both non-vectorized scalars). The output type
  merges the types of `tensor`, `min` and `max` (numbers are weakly typed).

  ## Examples

      iex> Nx.clip(Nx.tensor([-3, 1, 5]), 0, 2)
      #Nx.Tensor<
        s64[3]
        [0, 1, 2]
      >

      iex> Nx.clip(Nx.tensor([1, 2]), Nx.tensor([0, 1]), 2)
      ** (ArgumentError) min value must be a non-vectorized scalar shape, got shape {2} and vectorized axes []

  """
  def clip(tensor, min, max) do
    # numbers become tensors of their own type first (s64, f32), as in Nx 0.7.2
    {tensor, min, max} = {to_tensor(tensor), to_tensor(min), to_tensor(max)}

    for {name, bound} <- [min: min, max: max], bound.shape != {} or bound.vectorized_axes != [] do
      raise ArgumentError,
            "#{name} value must be a non-vectorized scalar shape, got shape " <>
              "#{inspect(bound.shape)} and vectorized axes #{inspect(bound.vectorized_axes)}"
    end

    type = tensor.type |> Nx.Type.merge(min.type) |> Nx.Type.merge(max.type)
    # (Nx 0.7.2 names it clip/2 in this message)
    no_complex!(%T{tensor | type: type}, :clip, 2)
    apply_op(:clip, [tensor, min, max], %{}, type, tensor.shape, axis_names(tensor))
  end

  ## Unary ops

  # Each unary op's type rule: {the output type (an output_type/2 kind), whether complex
  # inputs are taken, the sentence of the op's doc that says so (`\n` where its line breaks)}
  @unary_type_rules %{
    float: {:float, true, "Integer inputs give `{:f, 32}`; floating inputs keep their type."},
    float_complex:
      {:float, true,
       "Integer inputs give `{:f, 32}`; floating and complex inputs keep\ntheir type."},
    float_real:
      {:float, false,
       "Integer inputs give `{:f, 32}`; floating inputs keep\ntheir type. Complex inputs raise."},
    same: {:same, true, "The output has the input's type."},
    abs: {:abs, true, "The output has the input's type."},
    keep: {:same, true, "The output has the input's type (integers pass through\nunchanged)."},
    keep_real:
      {:same, false,
       "The output has the input's type (integers pass through\nunchanged). " <>
         "Complex inputs raise."}
  }

  # name: {description, type rule, the example's argument, its result's header and value}
  @unary_ops [
    exp: {"Exponential", :float, "0.0", "f32", "1.0"},
    expm1: {"`exp(x) - 1`", :float, "0.0", "f32", "0.0"},
    log: {"Natural logarithm", :float, "1.0", "f32", "0.0"},
    log1p: {"`log(1 + x)`", :float, "0.0", "f32", "0.0"},
    sigmoid: {"Logistic sigmoid `1 / (1 + exp(-x))`", :float, "0.0", "f32", "0.5"},
    sqrt: {"Square root", :float, "4.0", "f32", "2.0"},
    rsqrt: {"Reciprocal square root", :float, "4.0", "f32", "0.5"},
    cbrt:
      {"Cube root (of complex numbers, the principal one)", :float_complex, "8.0", "f32", "2.0"},
    sin: {"Sine", :float, "0.0", "f32", "0.0"},
    cos: {"Cosine", :float, "0.0", "f32", "1.0"},
    tan: {"Tangent", :float, "0.0", "f32", "0.0"},
    asin: {"Inverse sine", :float_complex, "0.0", "f32", "0.0"},
    acos: {"Inverse cosine", :float_complex, "1.0", "f32", "0.0"},
    atan: {"Inverse tangent", :float_complex, "0.0", "f32", "0.0"},
    sinh: {"Hyperbolic sine", :float_complex, "0.0", "f32", "0.0"},
    cosh: {"Hyperbolic cosine", :float_complex, "0.0", "f32", "1.0"},
    tanh: {"Hyperbolic tangent", :float, "0.0", "f32", "0.0"},
    asinh: {"Inverse hyperbolic sine", :float_complex, "0.0", "f32", "0.0"},
    acosh: {"Inverse hyperbolic cosine", :float_complex, "1.0", "f32", "0.0"},
    atanh: {"Inverse hyperbolic tangent", :float_complex, "0.0", "f32", "0.0"},
    erf: {"Error function", :float_real, "0.0", "f32", "0.0"},
    erfc: {"Complementary error function `1 - erf(x)`", :float_real, "0.0", "f32", "1.0"},
    erf_inv: {"Inverse error function", :float_real, "0.0", "f32", "0.0"},
    negate: {"Negation", :same, "2", "s64", "-2"},
    abs: {"Absolute value (the real type for complex inputs)", :abs, "-2", "s64", "2"},
    sign:
      {"The sign (-1, 0 or 1; `z / |z|` for complex)", :keep, "Nx.tensor([-2.5, 0.0, 3.0])",
       "f32[3]", "[-1.0, 0.0, 1.0]"},
    floor:
      {"Rounds toward negative infinity", :keep_real, "Nx.tensor([-1.5, 1.5])", "f32[2]",
       "[-2.0, 1.0]"},
    ceil:
      {"Rounds toward positive infinity", :keep_real, "Nx.tensor([-1.5, 1.5])", "f32[2]",
       "[-1.0, 2.0]"},
    round:
      {"Rounds to the nearest integer, halves away from zero", :keep_real,
       "Nx.tensor([-2.5, 0.5, 1.4])", "f32[3]", "[-3.0, 1.0, 1.0]"}
  ]

  for {name, {description, rule, input, header, result}} <- @unary_ops do
    {output, complex?, type_doc} = Map.fetch!(@unary_type_rules, rule)

    @doc type: :element
    @doc """
    #{description}, element-wise. #{type_doc}

    ## Examples

        iex> Nx.#{name}(#{input})
        #Nx.Tensor<
          #{header}
          #{result}
        >

    """
    def unquote(name)(tensor) do
      tensor = to_tensor(tensor)
      unless unquote(complex?), do: no_complex!(tensor, unquote(name), 1)
      type = output_type(unquote(output), tensor.type)
      apply_op(unquote(name), [tensor], %{}, type, tensor.shape, axis_names(tensor))
    end
  end

  @doc type: :element
  @doc """
  The element-wise logarithm in `base`: `log(tensor) / log(base)`, the base's logarithm in
  the base's own type (an integer or float base is an f32: `Nx.log(8.0 in f64, 2)` is
  `2.9999999917564937`, as in Nx).

  ## Examples

      iex> Nx.log(Nx.tensor([3, 9, 27, 81]), 3)
      #Nx.Tensor<
        f32[4]
        [1.0, 2.0, 3.0, 4.0]
      >

  """
  def log(tensor, base) do
    if is_number(base) and (base <= 0 or base == 1) do
      raise ArgumentError,
            "expected base to be greater than 0 and different than 1, got: #{inspect(base)}"
    end

    one_graph([to_tensor(tensor), to_tensor(base)], fn t, b -> divide(log(t), log(b)) end)
  end

  @doc type: :element
  @doc """
  The element-wise logarithm in base 2: `log(tensor) / log(2)`.

  ## Examples

      iex> Nx.log2(Nx.tensor([1, 2, 4, 8]))
      #Nx.Tensor<
        f32[4]
        [0.0, 1.0, 2.0, 3.0]
      >

  """
  def log2(tensor), do: log(tensor, 2)

  @doc type: :element
  @doc """
  The element-wise logarithm in base 10: `log(tensor) / log(10)`.

  ## Examples

      iex> Nx.log10(Nx.tensor([1, 1000]))
      #Nx.Tensor<
        f32[2]
        [0.0, 3.0]
      >

  XLA's f32 logarithm can differ from Nx's binary backend (which computes in double) in the
  last bit: `Nx.log10(10)` is `0.9999999403953552` here, `1.0` there.

  """
  def log10(tensor), do: log(tensor, 10)

  @bitwise_unary_ops [
    bitwise_not: {"Bitwise not", "[0, 1, -2]", "s64[3]", "[-1, -2, 1]"},
    population_count: {"The number of 1 bits", "[0, 7, 255]", "u8[3]", "[0, 3, 8]"},
    count_leading_zeros: {"The number of leading 0 bits", "[0, 1, 255]", "u8[3]", "[8, 7, 0]"}
  ]

  for {name, {description, input, header, result}} <- @bitwise_unary_ops do
    type_opt = if String.starts_with?(header, "u8"), do: ", type: :u8", else: ""

    @doc type: :element
    @doc """
    #{description} of each element of an integer tensor; the output has the input's type.

    ## Examples

        iex> Nx.#{name}(Nx.tensor(#{input}#{type_opt}))
        #Nx.Tensor<
          #{header}
          #{result}
        >

    """
    def unquote(name)(tensor) do
      tensor = to_tensor(tensor)
      integer_only!(tensor.type, "#{unquote(name)}/1")
      apply_op(unquote(name), [tensor], %{}, tensor.type, tensor.shape, axis_names(tensor))
    end
  end

  @predicate_ops [
    is_nan: {"Whether each element is NaN", "[1.0, :nan, :infinity]", "[0, 1, 0]"},
    is_infinity: {"Whether each element is infinite", "[1.0, :nan, :neg_infinity]", "[0, 0, 1]"},
    logical_not:
      {"Logical not: 1 where an element is zero, 0 elsewhere", "[0.0, 2.0, -1.0]", "[1, 0, 0]"}
  ]

  for {name, {description, input, result}} <- @predicate_ops do
    @doc type: :element
    @doc """
    #{description}; returns a `u8` tensor of 0s and 1s. For complex elements a part that is
    NaN (infinite) makes the element NaN (infinite); integers are never NaN or infinite.

    ## Examples

        iex> Nx.#{name}(Nx.tensor(#{input}))
        #Nx.Tensor<
          u8[3]
          #{result}
        >

    """
    def unquote(name)(tensor) do
      tensor = to_tensor(tensor)
      apply_op(unquote(name), [tensor], %{}, {:u, 8}, tensor.shape, axis_names(tensor))
    end
  end

  @doc type: :element
  @doc """
  The real part of each element: `{:c, 64}` gives `{:f, 32}`, `{:c, 128}` gives `{:f, 64}`;
  a real tensor gives itself as a float tensor.

  ## Examples

      iex> Nx.real(Nx.tensor([Complex.new(1, 2), Complex.new(-3, 4)]))
      #Nx.Tensor<
        f32[2]
        [1.0, -3.0]
      >

  """
  def real(tensor) do
    tensor = to_tensor(tensor)
    apply_op(:real, [tensor], %{}, Nx.Type.to_real(tensor.type), tensor.shape, axis_names(tensor))
  end

  @doc type: :element
  @doc """
  The imaginary part of each element, of the real type of the complex type (zeros for a
  real tensor).

  ## Examples

      iex> Nx.imag(Nx.tensor([Complex.new(1, 2), Complex.new(-3, 4)], type: :c128))
      #Nx.Tensor<
        f64[2]
        [2.0, 4.0]
      >

  """
  def imag(tensor) do
    tensor = to_tensor(tensor)
    apply_op(:imag, [tensor], %{}, Nx.Type.to_real(tensor.type), tensor.shape, axis_names(tensor))
  end

  @doc type: :element
  @doc """
  The complex conjugate of each element; the output is complex (`f64` gives `c128`, other
  real types `c64`).

  ## Examples

      iex> Nx.conjugate(Nx.tensor([Complex.new(1, 2), 3]))
      #Nx.Tensor<
        c64[2]
        [1.0-2.0i, 3.0-0.0i]
      >

  """
  def conjugate(tensor) do
    tensor = to_tensor(tensor)

    apply_op(
      :conjugate,
      [tensor],
      %{},
      Nx.Type.to_complex(tensor.type),
      tensor.shape,
      axis_names(tensor)
    )
  end

  @doc type: :element
  @doc """
  The angle of each element in the complex plane, `atan2(imag, real)`: `f32` for `c64` and
  real inputs, `f64` for `c128`.

  ## Examples

      iex> Nx.phase(Nx.tensor([Complex.new(0, 1), Complex.new(-1, 0)]))
      #Nx.Tensor<
        f32[2]
        [1.5707963705062866, 3.1415927410125732]
      >

  """
  def phase(tensor) do
    tensor = to_tensor(tensor)
    type = Nx.Type.to_real(tensor.type)

    composite(
      fn t -> atan2(as_type(imag(t), type), as_type(real(t), type)) end,
      [tensor]
    )
  end

  @doc type: :element
  @doc """
  The complex tensor `real + imag * i` (neither may be complex); the type is the merged type
  made complex (`c64` from integers and `f32`).

  ## Examples

      iex> Nx.complex(Nx.tensor([1, 2]), Nx.tensor([3, 4]))
      #Nx.Tensor<
        c64[2]
        [1.0+3.0i, 2.0+4.0i]
      >

  """
  def complex(real, imag) do
    {real, imag} = {to_tensor(real), to_tensor(imag)}

    if Nx.Type.complex?(real.type) or Nx.Type.complex?(imag.type) do
      raise ArgumentError,
            "complex/2 expects real tensors, got types #{Nx.Type.to_string(real.type)} and " <>
              "#{Nx.Type.to_string(imag.type)}"
    end

    type = Nx.Type.to_complex(Nx.Type.merge(real.type, imag.type))

    composite(
      fn re, im ->
        add(as_type(re, type), multiply(as_type(im, type), tensor(Complex.new(0, 1), type: type)))
      end,
      [real, imag]
    )
  end

  @doc type: :element
  @doc """
  Applies `fun`, a function of one scalar tensor, to every element (vectorized axes
  included). `fun` is traced once, on a vectorized scalar standing for all the elements, and
  the result is one graph (inlined inside `defn`). Outside `defn`, a function that cannot be
  traced that way (one calling `Nx.to_number/1`, say) is called on each element in turn, as
  Nx's binary backend does: one call per element.

  ## Options

    * `:type` - the type of the result; the tensor's type by default (`fun`'s results are
      converted to it)

  ## Examples

      iex> Nx.map(Nx.tensor([[1, 2, 3], [4, 5, 6]]), [type: :f64], fn x -> Nx.add(x, 1) end)
      #Nx.Tensor<
        f64[2][3]
        [
          [2.0, 3.0, 4.0],
          [5.0, 6.0, 7.0]
        ]
      >

  """
  def map(tensor, opts \\ [], fun) when is_list(opts) and is_function(fun, 1) do
    tensor = to_tensor(tensor)
    opts = keyword!(opts, type: tensor.type)
    type = Nx.Type.normalize!(opts[:type])

    # inside defn the function's parameter has the output type (Nx 0.7.2's expression map:
    # `map(t, [type: :f64], &Nx.exp/1)` computes in f64); eagerly it has the input's type
    in_defn = Nx.Defn.Expr.tracing?() or match?(%T{data: %Nx.Defn.Expr{}}, tensor)

    try do
      traced_map(tensor, type, fun, in_defn)
    rescue
      # a function that needs concrete elements (Nx.to_number, Float.round, ...) cannot be
      # traced: outside defn it is called on each element, as Nx's binary backend does
      error ->
        if in_defn,
          do: reraise(error, __STACKTRACE__),
          else: map_elements(tensor, type, fun)
    end
  end

  defp traced_map(tensor, type, fun, in_defn) do
    axes = tensor.vectorized_axes

    one_graph([devectorize(tensor, keep_names: false)], fn t ->
      n = size(t)
      element = t |> reshape({n}) |> vectorize(:__nx_map__)
      element = if in_defn, do: as_type(element, type), else: element
      result = element |> fun.() |> to_tensor()
      result = as_type(result, type)

      # a result that does not depend on the element is not vectorized: one value for all
      flat =
        if result.vectorized_axes == [],
          do: broadcast(result, {n}),
          else: devectorize(result, keep_names: false)

      flat = reshape(flat, t.shape)
      if axes == [], do: flat, else: vectorize(flat, axes)
    end)
  end

  defp map_elements(tensor, type, fun) do
    t = devectorize(tensor, keep_names: false)

    values =
      for x <- to_flat_list(t) do
        case fun.(tensor(x, type: t.type)) do
          %T{} = result -> to_number(result)
          result -> result
        end
      end

    result = values |> tensor(type: type) |> reshape(t.shape)
    if tensor.vectorized_axes == [], do: result, else: vectorize(result, tensor.vectorized_axes)
  end

  ## Aggregates

  @reductions [
    sum: {"Sums the elements", :aggregate, "s64", "10"},
    product: {"Multiplies the elements", :aggregate, "s64", "24"},
    reduce_max: {"The maximum of the elements", :same, "s64", "4"},
    reduce_min: {"The minimum of the elements", :same, "s64", "1"},
    mean: {"The mean of the elements", :float, "f32", "2.5"}
  ]

  for {name, {description, kind, header, result}} <- @reductions do
    type_doc =
      case kind do
        :aggregate ->
          "Signed integers give `{:s, 64}`, unsigned `{:u, 64}`, floats keep their type."

        :same ->
          "The output has the input's type."

        :float ->
          "Integer inputs give `{:f, 32}`; floating inputs keep their type."
      end

    @doc type: :aggregation
    @doc """
    #{description} of a tensor, over all axes or over `:axes`.

    #{type_doc}

    ## Options

      * `:axes` - the axes to reduce (negative counts from the end); all by default
      * `:keep_axes` - keep the reduced axes with size 1; `false` by default

    ## Examples

        iex> Nx.#{name}(Nx.tensor([[1, 2], [3, 4]]))
        #Nx.Tensor<
          #{header}
          #{result}
        >

    """
    def unquote(name)(tensor, opts \\ []) do
      tensor = to_tensor(tensor)
      opts = keyword!(opts, [:axes, keep_axes: false])
      keep_axes = opts[:keep_axes]
      names = axis_names(tensor)
      {shape, axes} = Nx.Shape.reduce(tensor.shape, opts[:axes], keep_axes, names)
      names = Nx.Shape.reduce_names(names, axes, keep_axes)

      if unquote(name) in [:reduce_max, :reduce_min], do: no_complex!(tensor, unquote(name), 2)
      type = output_type(unquote(kind), tensor.type)
      apply_op(unquote(name), [tensor], %{axes: axes, keep_axes: keep_axes}, type, shape, names)
    end
  end

  for {name, word, result} <- [{:all, "all", "0"}, {:any, "any", "1"}] do
    @doc type: :aggregation
    @doc """
    Whether #{word} of the elements are nonzero, over all axes or over `:axes`; returns a
    `u8` tensor of 0s and 1s.

    ## Options

      * `:axes` - the axes to reduce (negative counts from the end); all by default
      * `:keep_axes` - keep the reduced axes with size 1; `false` by default

    ## Examples

        iex> Nx.#{name}(Nx.tensor([[1, 0], [2, 3]]))
        #Nx.Tensor<
          u8
          #{result}
        >

    """
    def unquote(name)(tensor, opts \\ []) do
      tensor = to_tensor(tensor)
      opts = keyword!(opts, [:axes, keep_axes: false])
      names = axis_names(tensor)
      {shape, axes} = Nx.Shape.reduce(tensor.shape, opts[:axes], opts[:keep_axes], names)
      names = Nx.Shape.reduce_names(names, axes, opts[:keep_axes])
      opts = %{axes: axes, keep_axes: opts[:keep_axes]}
      apply_op(unquote(name), [tensor], opts, {:u, 8}, shape, names)
    end
  end

  @doc type: :aggregation
  @doc """
  Returns a `u8` scalar: 1 when every element of `a` is within `atol + rtol * abs(b)` of
  the element of `b` (with broadcasting), 0 otherwise. Equal infinities are close; NaNs are
  close to each other only with `equal_nan: true`.

  ## Options

    * `:rtol` - relative tolerance (`1.0e-5`)
    * `:atol` - absolute tolerance (`1.0e-8`)
    * `:equal_nan` - whether NaNs in the same place compare equal (`false`)

  ## Examples

      iex> Nx.all_close(Nx.tensor([1.0, 2.0]), Nx.tensor([1.0, 2.00001]))
      #Nx.Tensor<
        u8
        1
      >
      iex> Nx.all_close(Nx.tensor([1.0, :nan]), Nx.tensor([1.0, :nan]), equal_nan: true)
      #Nx.Tensor<
        u8
        1
      >

  """
  def all_close(a, b, opts \\ []) do
    opts = keyword!(opts, equal_nan: false, rtol: 1.0e-5, atol: 1.0e-8)
    {a, b} = {to_tensor(a), to_tensor(b)}
    composite(fn a, b -> all_close_expr(a, b, opts) end, [a, b])
  end

  defp all_close_expr(a, b, opts) do
    type = Nx.Type.to_floating(Nx.Type.merge(a.type, b.type))
    {a, b} = {as_type(a, type), as_type(b, type)}
    tolerance = add(opts[:atol], multiply(opts[:rtol], Nx.abs(b)))
    close = select(equal(a, b), 1, less_equal(Nx.abs(subtract(a, b)), tolerance))
    # an infinity is close only to itself (inf - -inf is inf, within an infinite tolerance)
    close = select(logical_or(is_infinity(a), is_infinity(b)), equal(a, b), close)

    close =
      if opts[:equal_nan],
        do: select(multiply(not_equal(a, a), not_equal(b, b)), 1, close),
        else: close

    # all: no element is not close (1 for empty tensors, as Nx.all/1)
    equal(sum(subtract(1, as_type(close, {:s, 64}))), 0)
  end

  for {name, word, result} <- [{:argmax, "largest", "[1, 2]"}, {:argmin, "smallest", "[0, 0]"}] do
    @doc type: :aggregation
    @doc """
    The index of the #{word} element, over the whole (flattened) tensor or along `:axis`.
    NaN counts as the #{word} value.

    ## Options

      * `:axis` - the axis to search along; the whole tensor by default
      * `:keep_axis` - keep that axis with size 1 (only with `:axis`); `false` by default
      * `:tie_break` - `:low` (the default) picks the first of equal elements, `:high` the last
      * `:type` - the integer output type, `{:s, 64}` by default

    ## Examples

        iex> Nx.#{name}(Nx.tensor([[1, 3, 3], [2, 2, 9]]), axis: 1)
        #Nx.Tensor<
          s64[2]
          #{result}
        >

    """
    def unquote(name)(tensor, opts \\ []) do
      tensor = tensor |> to_tensor() |> no_complex!(unquote(name), 2)
      opts = keyword!(opts, [:axis, tie_break: :low, keep_axis: false, type: {:s, 64}])
      type = integer_only!(Nx.Type.normalize!(opts[:type]), "#{unquote(name)}/2 (:type)")

      unless opts[:tie_break] in [:low, :high] do
        raise ArgumentError,
              "unknown value for :tie_break, expected :high or :low, got: " <>
                inspect(opts[:tie_break])
      end

      names = axis_names(tensor)

      {shape, axis, names} =
        case opts[:axis] do
          nil ->
            {{}, nil, []}

          axis ->
            {shape, [axis]} = Nx.Shape.reduce(tensor.shape, [axis], opts[:keep_axis], names)
            {shape, axis, Nx.Shape.reduce_names(names, [axis], opts[:keep_axis])}
        end

      wire = %{axis: axis, keep_axis: opts[:keep_axis], tie_break: opts[:tie_break]}
      apply_op(unquote(name), [tensor], wire, type, shape, names)
    end
  end

  @doc type: :aggregation
  @doc """
  The variance over all axes or over `:axes`: the mean of the squared distances from the
  mean (`|x - mean|^2` for complex tensors), divided by `n - ddof` instead of `n` when
  `:ddof` is given. The output is floating (the real type for complex inputs).

  ## Options

    * `:axes` - the axes to reduce; all by default
    * `:ddof` - delta degrees of freedom; `0` by default
    * `:keep_axes` - keep the reduced axes with size 1; `false` by default

  ## Examples

      iex> Nx.variance(Nx.tensor([[1, 2], [3, 4]]))
      #Nx.Tensor<
        f32
        1.25
      >

      iex> Nx.variance(Nx.tensor([[1, 2], [3, 4]]), axes: [1], ddof: 1)
      #Nx.Tensor<
        f32[2]
        [0.5, 0.5]
      >

  """
  def variance(tensor, opts \\ []) do
    tensor = to_tensor(tensor)
    opts = keyword!(opts, [:axes, ddof: 0, keep_axes: false])
    {_shape, axes} = Nx.Shape.reduce(tensor.shape, opts[:axes], false, axis_names(tensor))
    axes = axes || Enum.to_list(0..(tuple_size(tensor.shape) - 1)//1)
    count = axes |> Enum.map(&elem(tensor.shape, &1)) |> Enum.reduce(1, &*/2)
    ddof = opts[:ddof]

    unless is_integer(ddof) and ddof >= 0 do
      raise ArgumentError, "expected :ddof to be a non-negative integer, got: #{inspect(ddof)}"
    end

    one_graph([tensor], fn t ->
      t = as_type(t, Nx.Type.to_floating(t.type))
      diff = subtract(t, mean(t, axes: axes, keep_axes: true))

      squares =
        if Nx.Type.complex?(t.type),
          do: multiply(Nx.abs(diff), Nx.abs(diff)),
          else: multiply(diff, diff)

      squares
      |> sum(axes: axes, keep_axes: opts[:keep_axes])
      |> divide(count - ddof)
    end)
  end

  @doc type: :aggregation
  @doc """
  The standard deviation: the square root of `variance/2` (same options).

  ## Examples

      iex> Nx.standard_deviation(Nx.tensor([1, 2, 3, 4, 5, 6, 7, 8]))
      #Nx.Tensor<
        f32
        2.291287899017334
      >

  """
  def standard_deviation(tensor, opts \\ []), do: sqrt(variance(tensor, opts))

  @doc type: :aggregation
  @doc """
  The mean weighted by `weights`: `sum(t * w) / sum(w)` over all axes or `:axes`
  (`:keep_axes` keeps them with size 1). Weights of another shape than the tensor's have one
  axis per entry of `:axes`, laid along those axes. Integers give `f32`.

  ## Examples

      iex> Nx.weighted_mean(Nx.tensor([1, 2, 3]), Nx.tensor([3, 2, 1]))
      #Nx.Tensor<
        f32
        1.6666666269302368
      >
      iex> Nx.weighted_mean(Nx.iota({3, 4}), Nx.tensor([1, 2, 3, 4]), axes: [1])
      #Nx.Tensor<
        f32[3]
        [2.0, 6.0, 10.0]
      >

  """
  def weighted_mean(tensor, weights, opts \\ []) do
    {tensor, weights} = {to_tensor(tensor), to_tensor(weights)}
    opts = keyword!(opts, [:axes, keep_axes: false])

    axes =
      if opts[:axes], do: Nx.Shape.normalize_axes(tensor.shape, opts[:axes], axis_names(tensor))

    laid =
      cond do
        weights.shape == tensor.shape ->
          :same_shape

        axes == nil ->
          raise ArgumentError,
                "weighted_mean needs :axes when the weights' shape #{inspect(weights.shape)} " <>
                  "differs from the tensor's #{inspect(tensor.shape)}"

        tuple_size(weights.shape) != length(axes) ->
          raise ArgumentError,
                "weighted_mean expects weights of rank #{length(axes)} (one axis per entry of " <>
                  ":axes), got shape #{inspect(weights.shape)}"

        true ->
          :along_axes
      end

    type = Nx.Type.to_floating(Nx.Type.merge(tensor.type, weights.type))
    sum_opts = [axes: axes, keep_axes: opts[:keep_axes]]

    composite(
      fn t, w ->
        # (weights laid along :axes are broadcast inside the one graph)
        w = if laid == :along_axes, do: broadcast(w, t.shape, axes: axes), else: w
        {t, w} = {as_type(t, type), as_type(w, type)}
        divide(sum(multiply(t, w), sum_opts), sum(w, sum_opts))
      end,
      [tensor, weights]
    )
  end

  @doc type: :aggregation
  @doc """
  The median over all elements, or along `:axis` (`:keep_axis` keeps it with size 1). With an
  odd count it is the middle element (the input's type); with an even count the mean of the
  two middle ones (integers give `f32`).

  ## Examples

      iex> Nx.median(Nx.tensor([3, 1, 2]))
      #Nx.Tensor<
        s64
        2
      >
      iex> Nx.median(Nx.tensor([[1, 2, 3], [4, 5, 6]]), axis: 0)
      #Nx.Tensor<
        f32[3]
        [2.5, 3.5, 4.5]
      >

  """
  def median(tensor, opts \\ []) do
    tensor = to_tensor(tensor)
    opts = keyword!(opts, axis: nil, keep_axis: false)
    # (Nx's median sorts, and the refusal names sort/2)
    no_complex!(tensor, :sort, 2)

    # (over all elements: the flattened tensor's axis 0, flattened inside the one graph)
    {flat?, axis, keep} =
      case opts[:axis] do
        nil ->
          {true, 0, false}

        axis ->
          {false, Nx.Shape.normalize_axis(tensor.shape, axis, axis_names(tensor)),
           opts[:keep_axis]}
      end

    n = if flat?, do: size(tensor), else: elem(tensor.shape, axis)

    composite(
      fn t ->
        sorted = sort(if(flat?, do: flatten(t), else: t), axis: axis)

        middle =
          if rem(n, 2) == 1,
            do: slice_along_axis(sorted, div(n, 2), 1, axis: axis),
            else:
              mean(slice_along_axis(sorted, div(n, 2) - 1, 2, axis: axis),
                axes: [axis],
                keep_axes: true
              )

        if keep, do: middle, else: squeeze(middle, axes: [axis])
      end,
      [tensor]
    )
  end

  @doc type: :element
  @doc """
  The most frequent value over all elements, or along `:axis`. Among values that occur
  equally often the smallest wins. The axis goes away unless `keep_axis: true` keeps it
  with size 1 (over all elements that keeps every axis, each of size 1). For vectorized
  tensors `:axis` counts in the non-vectorized shape. The type is the input's.

  ## Examples

      iex> Nx.mode(Nx.tensor([[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]]))
      #Nx.Tensor<
        s64
        1
      >

      iex> Nx.mode(Nx.tensor([[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]]), axis: 1)
      #Nx.Tensor<
        s64[2]
        [2, 1]
      >

      iex> Nx.mode(Nx.tensor([[1, 2, 2], [3, 3, 1]], names: [:a, :b]), axis: :b, keep_axis: true)
      #Nx.Tensor<
        s64[a: 2][b: 1]
        [
          [2],
          [3]
        ]
      >

      iex> Nx.mode(Nx.tensor([[1, 2, 2], [3, 3, 1]]) |> Nx.vectorize(:x))
      #Nx.Tensor<
        vectorized[x: 2]
        s64
        [2, 3]
      >

  """
  def mode(tensor, opts \\ []) do
    opts = keyword!(opts, axis: nil, keep_axis: false)
    tensor = to_tensor(tensor)
    names = axis_names(tensor)
    axis = opts[:axis] && Nx.Shape.normalize_axis(tensor.shape, opts[:axis], names)
    keep = opts[:keep_axis]

    cond do
      tensor.shape == {} ->
        if keep, do: new_axis(tensor, -1), else: tensor

      size(tensor) == 1 and axis == nil ->
        if keep, do: tensor, else: squeeze(tensor)

      axis != nil and elem(tensor.shape, axis) == 1 ->
        if keep, do: tensor, else: squeeze(tensor, axes: [axis])

      true ->
        composite(fn t -> vectorized_mode(t, axis, keep) end, [tensor])
    end
  end

  # the shape of mode's result (nil: over all elements)
  defp mode_shape(shape, nil, true), do: Tuple.duplicate(1, tuple_size(shape))
  defp mode_shape(_shape, nil, false), do: {}
  defp mode_shape(shape, axis, true), do: put_elem(shape, axis, 1)
  defp mode_shape(shape, axis, false), do: Tuple.delete_at(shape, axis)

  # mode over the data of `tensor`, its vectorized axes leading: over all elements is over
  # the one axis of a flattened copy of each entry
  defp vectorized_mode(%T{vectorized_axes: vectorized, shape: shape} = tensor, axis, keep) do
    sizes = Keyword.values(vectorized)
    k = length(sizes)
    data = devectorize(tensor, keep_names: false)

    {data, data_axis} =
      if axis,
        do: {data, k + axis},
        else: {reshape(data, List.to_tuple(sizes ++ [size(shape)])), k}

    names =
      case {axis, keep} do
        {nil, _} -> nil
        {_, true} -> axis_names(tensor)
        {_, false} -> List.delete_at(axis_names(tensor), axis)
      end

    out_shape = mode_shape(shape, axis, keep)

    data
    |> mode_along(data_axis)
    |> reshape(List.to_tuple(sizes ++ Tuple.to_list(out_shape)))
    |> vectorize_unless_none(vectorized)
    |> rename(names || unnamed(out_shape))
  end

  # After sorting along `axis` equal values form runs. The distance of an element to the
  # start of its run is largest at the run's last element, and the first position where it
  # is largest ends the longest run with the smallest value. The axis is kept, size 1.
  defp mode_along(data, axis) do
    n = elem(data.shape, axis)
    sorted = sort(data, axis: axis)

    run_starts =
      concatenate(
        [
          broadcast(1, put_elem(data.shape, axis, 1)),
          not_equal(
            slice_along_axis(sorted, 1, n - 1, axis: axis),
            slice_along_axis(sorted, 0, n - 1, axis: axis)
          )
        ],
        axis: axis
      )

    positions = iota(data.shape, axis: axis)
    start_of_run = cumulative_max(select(run_starts, positions, 0), axis: axis)
    last_of_longest = argmax(subtract(positions, start_of_run), axis: axis, keep_axis: true)
    take_along_axis(sorted, last_of_longest, axis: axis)
  end

  defp vectorize_unless_none(tensor, []), do: tensor
  defp vectorize_unless_none(tensor, vectorized), do: vectorize(tensor, vectorized)

  @doc type: :aggregation
  @doc """
  The covariance matrix of `tensor` `{..., n, d}` (`n` observations of `d` variables; leading
  axes are batches): `{..., d, d}`, the products of the deviations from `mean` summed over the
  observations and divided by `n - ddof`. `mean` (`{..., d}` or `{d}`) defaults to the mean of
  the observations. Option `:ddof` (delta degrees of freedom), 0 by default. Integers give
  `f32`.

  ## Examples

      iex> Nx.covariance(Nx.tensor([[1, 2], [3, 4], [5, 6]]), ddof: 1)
      #Nx.Tensor<
        f32[2][2]
        [
          [4.0, 4.0],
          [4.0, 4.0]
        ]
      >

  """
  def covariance(tensor, mean_or_opts \\ [], opts \\ [])

  def covariance(tensor, opts, []) when is_list(opts), do: covariance_of(tensor, nil, opts)
  def covariance(tensor, mean, opts), do: covariance_of(tensor, to_tensor(mean), opts)

  defp covariance_of(tensor, mean, opts) do
    tensor = to_tensor(tensor)
    ddof = keyword!(opts, ddof: 0)[:ddof]
    rank = tuple_size(tensor.shape)

    if rank < 2 do
      raise ArgumentError,
            "expected input tensor of rank at least 2 (observations and variables), got: " <>
              inspect(tensor.shape)
    end

    if mean && mean.shape == {} do
      raise ArgumentError, "expected mean of rank at least 1, got 0"
    end

    n = elem(tensor.shape, rank - 2)
    type = Nx.Type.to_floating(Nx.Type.merge(tensor.type, (mean || tensor).type))

    covariance = fn t, m ->
      t = as_type(t, type)
      m = if m, do: as_type(m, type), else: mean(t, axes: [rank - 2])
      # the products are summed on doubles and rounded once, as Nx's binary backend sums
      # them (the worker's dot sums in the tensor's type)
      centered = t |> subtract(new_axis(m, -2)) |> as_type(covariance_sum_type(type))
      # (a batch of means broadcasts the observations: the batch axes are the centered ones')
      centered_rank = tuple_size(centered.shape)
      batch = Enum.to_list(0..(centered_rank - 3)//1)

      left = if Nx.Type.complex?(type), do: conjugate(centered), else: centered

      left
      |> dot([centered_rank - 2], batch, centered, [centered_rank - 2], batch)
      |> as_type(type)
      |> divide(n - ddof)
    end

    # (without a mean, the graph takes the tensor alone)
    if mean,
      do: composite(covariance, [tensor, mean]),
      else: composite(&covariance.(&1, nil), [tensor])
  end

  defp covariance_sum_type({:c, _}), do: {:c, 128}
  defp covariance_sum_type(_float), do: {:f, 64}

  @doc type: :aggregation
  @doc """
  `log(sum(exp(tensor)))` over all axes or over `:axes`, computed without overflow (the
  maximum is subtracted first and held fixed for differentiation). The output is floating.

  ## Options

    * `:axes` - the axes to reduce; all by default
    * `:exp_scaling_factor` - a tensor `b` broadcast against `tensor`: the result is
      `log(sum(b * exp(tensor)))`
    * `:keep_axes` - keep the reduced axes with size 1; `false` by default

  ## Examples

      iex> Nx.logsumexp(Nx.tensor([1000.0, 1000.0]))
      #Nx.Tensor<
        f32
        1000.6931762695312
      >

  """
  def logsumexp(tensor, opts \\ []) do
    tensor = to_tensor(tensor)
    opts = keyword!(opts, [:axes, :exp_scaling_factor, keep_axes: false])

    {shape, axes} =
      Nx.Shape.reduce(tensor.shape, opts[:axes], opts[:keep_axes], axis_names(tensor))

    # exp_scaling_factor b: log(sum(b * exp(t))), b broadcast against the tensor
    factor = to_tensor(Keyword.get(opts, :exp_scaling_factor, 1.0))

    one_graph([tensor, factor], fn t, b ->
      t = as_type(t, Nx.Type.to_floating(t.type))
      max = reduce_max(t, axes: axes, keep_axes: true)
      max = Nx.Defn.Expr.metadata(max, %{stop_grad: true})
      finite = logical_not(logical_or(is_nan(max), is_infinity(max)))
      max = select(finite, max, 0)
      exponentials = t |> subtract(max) |> exp()

      exponentials =
        if opts[:exp_scaling_factor], do: multiply(b, exponentials), else: exponentials

      exponentials
      |> sum(axes: axes, keep_axes: opts[:keep_axes])
      |> log()
      |> add(reshape(max, shape))
    end)
  end

  ## Cumulative ops

  @scans [
    cumulative_sum: {"sum", "[1, 3, 6, 10]", "[10, 9, 7, 4]"},
    cumulative_product: {"product", "[1, 2, 6, 24]", "[24, 24, 12, 4]"},
    cumulative_max: {"maximum", "[1, 2, 3, 4]", "[4, 4, 4, 4]"},
    cumulative_min: {"minimum", "[1, 1, 1, 1]", "[1, 2, 3, 4]"}
  ]

  for {name, {word, result, reversed}} <- @scans do
    @doc type: :cumulative
    @doc """
    The running #{word} along `:axis`: element `i` is the #{word} of the elements `0..i` (of
    `i..n-1` with `reverse: true`). The output has the input's type.

    ## Options

      * `:axis` - the axis to scan along; `0` by default
      * `:reverse` - scan from the end; `false` by default

    ## Examples

        iex> Nx.#{name}(Nx.tensor([1, 2, 3, 4]))
        #Nx.Tensor<
          s64[4]
          #{result}
        >

        iex> Nx.#{name}(Nx.tensor([1, 2, 3, 4]), reverse: true)
        #Nx.Tensor<
          s64[4]
          #{reversed}
        >

    """
    def unquote(name)(tensor, opts \\ []) do
      tensor = to_tensor(tensor)
      opts = keyword!(opts, axis: 0, reverse: false)

      if unquote(name) in [:cumulative_max, :cumulative_min],
        do: no_complex!(tensor, unquote(name), 2)

      axis = Nx.Shape.normalize_axis(tensor.shape, opts[:axis], axis_names(tensor))
      wire = %{axis: axis, reverse: opts[:reverse] == true}
      apply_op(unquote(name), [tensor], wire, tensor.type, tensor.shape, axis_names(tensor))
    end
  end

  @doc type: :ndim
  @doc """
  The `:order`-th discrete difference along `:axis` (the last by default): `out[i] =
  t[i + 1] - t[i]`, applied `order` times (each shortens the axis by one).

  ## Options

    * `:order` - how many times to take the difference; `1` by default, `0` returns the tensor
    * `:axis` - the axis; `-1` by default

  ## Examples

      iex> Nx.diff(Nx.tensor([1, 3, 6, 10]))
      #Nx.Tensor<
        s64[3]
        [2, 3, 4]
      >

      iex> Nx.diff(Nx.tensor([[1, 3, 7], [2, 2, 5]]), order: 2)
      #Nx.Tensor<
        s64[2][1]
        [
          [2],
          [3]
        ]
      >

  """
  def diff(tensor, opts \\ []) do
    opts = keyword!(opts, order: 1, axis: -1)
    tensor = to_tensor(tensor)
    n = opts[:order]
    axis = Nx.Shape.normalize_axis(tensor.shape, opts[:axis], axis_names(tensor))

    if n < 0, do: raise(ArgumentError, "order must be non-negative but got: #{inspect(n)}")

    size = elem(tensor.shape, axis)

    if n >= size and n > 0 do
      raise ArgumentError,
            "diff of order #{n} needs more than #{n} elements along axis #{axis}, the tensor " <>
              "has #{size}"
    end

    one_graph([tensor], fn t ->
      Enum.reduce(0..(n - 1)//1, t, fn step, acc ->
        len = size - step - 1

        subtract(
          slice_along_axis(acc, 1, len, axis: axis),
          slice_along_axis(acc, 0, len, axis: axis)
        )
      end)
    end)
  end

  ## Windows

  @windows [
    window_sum: {"sum", "[10, 18]", "[42, 50]"},
    window_product: {"product", "[0, 252]", "[11232, 23100]"},
    window_max: {"maximum", "[5, 7]", "[13, 15]"},
    window_min: {"minimum", "[0, 2]", "[8, 10]"}
  ]

  for {name, {word, row1, row2}} <- @windows do
    @doc type: :window
    @doc """
    The #{word} of every window of size `window_dimensions` (a tuple, one entry per axis)
    sliding over the tensor. The output has the input's type.

    ## Options

      * `:strides` - the step of the window along each axis (an integer for all axes, or a
        list); `1` by default
      * `:padding` - `:valid` (no padding, the default), `:same` (pad so that the output
        has `ceil(dim / stride)` elements per axis) or a list of `{low, high}` pairs; padded
        positions hold the #{word}'s identity
      * `:window_dilations` - the spacing of the window's elements (an integer or a list);
        `1` by default

    ## Examples

        iex> t = Nx.iota({4, 4})
        iex> Nx.#{name}(t, {2, 2}, strides: [2, 2])
        #Nx.Tensor<
          s64[2][2]
          [
            #{row1},
            #{row2}
          ]
        >

    """
    def unquote(name)(tensor, window_dimensions, opts \\ []) do
      tensor = tensor |> to_tensor()
      if unquote(name) in [:window_max, :window_min], do: no_complex!(tensor, unquote(name), 3)
      opts = keyword!(opts, window_dilations: 1, padding: :valid, strides: 1)

      {shape, config} =
        Nx.Shape.window(
          tensor.shape,
          window_dimensions,
          opts[:strides],
          opts[:padding],
          opts[:window_dilations]
        )

      apply_op(unquote(name), [tensor], config, tensor.type, shape, axis_names(tensor))
    end
  end

  @doc type: :window
  @doc """
  The mean of every window: `window_sum/3` (same options) divided by the number of elements
  of a window, padded positions counting as zeros. Integers give `f32`.

  ## Examples

      iex> Nx.window_mean(Nx.tensor([1, 2, 3, 4]), {2})
      #Nx.Tensor<
        f32[3]
        [1.5, 2.5, 3.5]
      >

  """
  def window_mean(tensor, window_dimensions, opts \\ []) do
    tensor = to_tensor(tensor)
    count = window_dimensions |> Tuple.to_list() |> Enum.product()
    composite(fn t -> divide(window_sum(t, window_dimensions, opts), count) end, [tensor])
  end

  for {name, word} <- [window_scatter_max: "maximum", window_scatter_min: "minimum"] do
    @doc type: :window
    @doc """
    Scatters `source` into a tensor of `tensor`'s shape filled with `init_value`: each
    window of `tensor` (as in `window_#{String.replace(Atom.to_string(name), "window_scatter_", "")}/3`) adds
    its `source` value at the position of its #{word} (the last one on ties, as Nx's
    binary backend selects; padding is never selected). `source`
    must have the windowed output's shape. The output type merges the types of `source` and
    `init_value`.

    ## Options

      * `:strides` - as in the window functions; `1` by default
      * `:padding` - `:valid` (the default), `:same` or a list of `{low, high}` pairs

    ## Examples

        iex> t = Nx.tensor([[7, 2, 5, 3], [3, 8, 9, 3], [1, 5, 7, 5], [0, 6, 2, 8]])
        iex> Nx.#{name}(t, Nx.tensor([[2, 6], [3, 1]]), 0, {2, 3}, strides: [2, 2], padding: [{0, 0}, {0, 1}]) |> Nx.shape()
        {4, 4}

    """
    def unquote(name)(tensor, source, init_value, window_dimensions, opts \\ []) do
      tensor = tensor |> to_tensor() |> no_complex!(unquote(name), 5)
      source = to_tensor(source)
      opts = keyword!(opts, padding: :valid, strides: 1)
      {source, init_value, type} = binary_args(source, init_value)

      if init_value.shape != {} do
        raise ArgumentError,
              "the init value must be a scalar, got shape #{inspect(init_value.shape)}"
      end

      {shape, config} =
        Nx.Shape.window(tensor.shape, window_dimensions, opts[:strides], opts[:padding], 1)

      if source.shape != shape do
        raise ArgumentError,
              "the source must have the shape of the windowed tensor, #{inspect(shape)}, " <>
                "got: #{inspect(source.shape)}"
      end

      config = Map.delete(config, :window_dilations)

      apply_op(
        unquote(name),
        [tensor, source, init_value],
        config,
        type,
        tensor.shape,
        axis_names(tensor)
      )
    end
  end

  ## Reductions with a function (Nx.Defn.ControlFlow builds the nodes)

  @doc type: :aggregation
  @doc """
  Reduces the tensor over all axes or over `:axes` with `fun`, starting from the scalar
  `acc`: `fun.(element, acc)` returns the new accumulator. `fun` is traced once, at trace
  time, on two scalars of the output type (a `defn`-style function: use `Nx` ops or the
  `defn` operators); on the worker the elements are folded in row-major order.

  The output type is the merge of the tensor's and `acc`'s types, or `:type`.

  ## Options

    * `:axes` - the axes to reduce; all by default
    * `:keep_axes` - keep the reduced axes with size 1; `false` by default
    * `:type` - the output type

  ## Examples

      iex> Nx.reduce(Nx.tensor([[1, 2, 3], [4, 5, 6]]), 0, [axes: [1]], &Nx.add/2)
      #Nx.Tensor<
        s64[2]
        [6, 15]
      >

  """
  def reduce(tensor, acc, opts \\ [], fun) when is_list(opts) and is_function(fun, 2) do
    # (as in Nx 0.7.2, a number `acc` merges into the tensor's type as a literal: a `u8`
    # tensor reduced from `1` stays `u8`)
    merged = literal_type(tensor, acc)
    {tensor, acc} = {to_tensor(tensor), to_tensor(acc)}
    opts = keyword!(opts, [:axes, :type, keep_axes: false])
    scalar_acc!(acc, "reduce/4")
    type = Nx.Type.normalize!(opts[:type] || merged)

    names = axis_names(tensor)
    {shape, axes} = Nx.Shape.reduce(tensor.shape, opts[:axes], opts[:keep_axes], names)
    names = Nx.Shape.reduce_names(names, axes, opts[:keep_axes])

    wire = %{axes: axes, keep_axes: opts[:keep_axes]}
    reduce_with(:reduce, tensor, acc, fun, wire, type, {shape, names})
  end

  @doc type: :window
  @doc """
  Reduces every window of size `window_dimensions` (a tuple, one entry per axis) with
  `fun`, starting from the scalar `acc` (see `reduce/4`); padded positions hold `acc`.

  The output has the tensor's type, as in Nx 0.7.2 (`acc` is converted to it).

  ## Options

    * `:strides` - the step of the window (an integer or a list); `1` by default
    * `:padding` - `:valid` (the default), `:same` or a list of `{low, high}` pairs
    * `:window_dilations` - the spacing of the window's elements; `1` by default

  ## Examples

      iex> Nx.window_reduce(Nx.tensor([1, 2, 3, 4]), 0, {2}, &Nx.add/2)
      #Nx.Tensor<
        s64[3]
        [3, 5, 7]
      >

  """
  def window_reduce(tensor, acc, window_dimensions, opts \\ [], fun)
      when is_list(opts) and is_function(fun, 2) do
    {tensor, acc} = {to_tensor(tensor), to_tensor(acc)}
    opts = keyword!(opts, window_dilations: 1, strides: 1, padding: :valid)
    scalar_acc!(acc, "window_reduce/5")
    type = tensor.type

    {shape, config} =
      Nx.Shape.window(
        tensor.shape,
        window_dimensions,
        opts[:strides],
        opts[:padding],
        opts[:window_dilations]
      )

    out = {shape, axis_names(tensor)}

    # eagerly, as Nx 0.7.2's binary backend, a function of plain Elixir arithmetic (`a + b`)
    # works too: where tracing it on tensors raises ArithmeticError, it is called on the
    # numbers of each window instead (inside defn the error stands)
    try do
      reduce_with(:window_reduce, tensor, acc, fun, config, type, out)
    rescue
      error in ArithmeticError ->
        if Nx.Defn.Expr.tracing?() or Nx.Defn.Expr.expr?(tensor) or Nx.Defn.Expr.expr?(acc),
          do: reraise(error, __STACKTRACE__),
          else: window_reduce_numbers(tensor, acc, fun, config, type, out)
    end
  end

  # window_reduce/5 in Elixir, on numbers: each window's elements in row-major order, each
  # `fun.(element, acc)` (a tensor result read back as a number), the padding filled with `acc`
  defp window_reduce_numbers(tensor, acc, fun, config, type, {shape, names}) do
    padded = pad(tensor, acc, Enum.map(config.padding, fn {lo, hi} -> {lo, hi, 0} end))
    dims = Tuple.to_list(padded.shape)
    values = List.to_tuple(to_flat_list(padded))
    row_strides = dims |> Enum.reverse() |> Enum.scan(1, &(&1 * &2)) |> Enum.reverse()
    row_strides = tl(row_strides) ++ [1]
    init = to_number(acc)

    offsets =
      config.window_dimensions
      |> Enum.zip(config.window_dilations)
      |> positions(fn {w, d} -> for i <- 0..(w - 1), do: i * d end)

    anchors =
      shape
      |> Tuple.to_list()
      |> Enum.zip(config.strides)
      |> positions(fn {n, s} -> for i <- 0..(n - 1), do: i * s end)

    results =
      for anchor <- anchors do
        Enum.reduce(offsets, init, fn offset, acc ->
          index =
            [anchor, offset, row_strides]
            |> Enum.zip_with(fn [a, o, r] -> (a + o) * r end)
            |> Enum.sum()

          case fun.(elem(values, index), acc) do
            %T{} = t -> to_number(t)
            number -> number
          end
        end)
      end

    results |> tensor(type: type) |> reshape(shape, names: names)
  end

  # the type of an element-wise result of `left` and `right`, each a tensor or a number, a
  # number merging in as a literal (Nx.Type.merge_number/2); two numbers: their sum's type
  defp literal_type(left, right) when is_number(left) and is_number(right),
    do: Nx.Type.infer(left + right)

  defp literal_type(left, right) when is_number(right),
    do: Nx.Type.merge_number(to_tensor(left).type, right)

  defp literal_type(left, right) when is_number(left),
    do: Nx.Type.merge_number(to_tensor(right).type, left)

  defp literal_type(left, right), do: Nx.Type.merge(to_tensor(left).type, to_tensor(right).type)

  defp scalar_acc!(%T{shape: {}}, _name), do: :ok

  defp scalar_acc!(%T{shape: shape}, name) do
    raise ArgumentError,
          "Nx.#{name} expects the accumulator to be a scalar, got a tensor of shape #{inspect(shape)}"
  end

  defp reduce_with(op, tensor, acc, fun, wire, type, {shape, names} = out) do
    if tensor.vectorized_axes != [] or acc.vectorized_axes != [] do
      raise ArgumentError,
            "Nx.#{op} with a function is not supported with vectorized tensors yet; use a " <>
              "named reduction (Nx.sum/2, Nx.reduce_max/2, ...) or Nx.devectorize/2 first"
    end

    if Nx.Defn.Expr.tracing?() or Nx.Defn.Expr.expr?(tensor) or Nx.Defn.Expr.expr?(acc) do
      template = %T{data: nil, type: type, shape: shape, names: names}
      {tensor, acc} = {as_type(tensor, type), as_type(acc, type)}
      Nx.Defn.ControlFlow.reduce(op, tensor, acc, fun, wire, template)
    else
      one_graph([tensor, acc], &reduce_with(op, &1, &2, fun, wire, type, out))
    end
  end

  ## Linear algebra

  @doc type: :ndim
  @doc """
  Dot product, as `Nx.dot/2`: with a scalar it multiplies; two vectors give their inner
  product; otherwise the last axis of `left` contracts with the only axis of a vector
  `right`, or with the second-to-last axis of `right`.

  ## Examples

      iex> Nx.dot(Nx.tensor([[1, 2], [3, 4]]), Nx.tensor([1, 1]))
      #Nx.Tensor<
        s64[2]
        [3, 7]
      >

  """
  def dot(left, right) do
    {left, right} = {to_tensor(left), to_tensor(right)}

    case {tuple_size(left.shape), tuple_size(right.shape)} do
      {0, _} -> multiply(left, right)
      {_, 0} -> multiply(left, right)
      {r1, 1} -> dot(left, [r1 - 1], [], right, [0], [])
      {r1, r2} -> dot(left, [r1 - 1], [], right, [r2 - 2], [])
    end
  end

  @doc type: :ndim
  @doc """
  Dot product contracting `contract_axes1` of `left` with `contract_axes2` of `right`.

  ## Examples

      iex> Nx.dot(Nx.tensor([[1, 2], [3, 4]]), [0], Nx.tensor([[1, 2], [3, 4]]), [0])
      #Nx.Tensor<
        s64[2][2]
        [
          [10, 14],
          [14, 20]
        ]
      >

  """
  def dot(left, contract_axes1, right, contract_axes2),
    do: dot(left, contract_axes1, [], right, contract_axes2, [])

  @doc type: :ndim
  @doc """
  General dot product with contraction and batch axes. The output has the batch
  dimensions, then the free dimensions of `left`, then those of `right`.

  ## Examples

      iex> t = Nx.tensor([[[1, 2]], [[3, 4]]])
      iex> Nx.dot(t, [2], [0], t, [2], [0])
      #Nx.Tensor<
        s64[2][1][1]
        [
          [
            [5]
          ],
          [
            [25]
          ]
        ]
      >

  """
  def dot(left, contract_axes1, batch_axes1, right, contract_axes2, batch_axes2) do
    {left, right} = {to_tensor(left), to_tensor(right)}
    c1 = Nx.Shape.normalize_axes(left.shape, contract_axes1, axis_names(left))
    b1 = Nx.Shape.normalize_axes(left.shape, batch_axes1, axis_names(left))
    c2 = Nx.Shape.normalize_axes(right.shape, contract_axes2, axis_names(right))
    b2 = Nx.Shape.normalize_axes(right.shape, batch_axes2, axis_names(right))
    shape = Nx.Shape.dot(left.shape, c1, b1, right.shape, c2, b2)
    names = Nx.Shape.dot_names(axis_names(left), c1, b1, axis_names(right), c2, b2)
    type = Nx.Type.merge(left.type, right.type)
    opts = %{contract_axes: {c1, c2}, batch_axes: {b1, b2}}
    apply_op(:dot, [left, right], opts, type, shape, names)
  end

  @doc type: :ndim
  @doc """
  The outer product: both tensors are flattened, the result is
  `{size(left), size(right)}` with `out[i][j] = left[i] * right[j]`.

  ## Examples

      iex> Nx.outer(Nx.tensor([1, 2]), Nx.tensor([10, 20, 30]))
      #Nx.Tensor<
        s64[2][3]
        [
          [10, 20, 30],
          [20, 40, 60]
        ]
      >

  """
  def outer(left, right) do
    {left, right} = {to_tensor(left), to_tensor(right)}

    # each side is flattened, named after its first axis (Nx's)
    name = fn t -> List.first(axis_names(t)) end

    composite(
      fn l, r ->
        l = reshape(l, {size(l), 1}, names: [name.(l), nil])
        multiply(l, reshape(r, {1, size(r)}, names: [nil, name.(r)]))
      end,
      [left, right]
    )
  end

  @doc type: :ndim
  @doc """
  Convolution of `input` `{batch, in_channels, spatial...}` with `kernel`
  `{out_channels, in_channels / feature_group_size, spatial...}`. The output type is the
  merged type made floating.

  ## Options

    * `:strides` - an integer or one per spatial axis (1)
    * `:padding` - `:valid` (default), `:same`, or `[{low, high}]` per spatial axis
    * `:input_dilation`, `:kernel_dilation` - an integer or one per spatial axis (1)
    * `:feature_group_size`, `:batch_group_size` - (1)
    * `:input_permutation`, `:kernel_permutation`, `:output_permutation` - the layouts
      (integers or the input's axis names): the input and kernel are transposed with these
      axes to the layouts above; the output's layout is described the same way (the result
      is transposed by the inverse permutation), so `[0, 3, 1, 2]` for both input and output
      means channels-last

  ## Examples

      iex> Nx.conv(Nx.iota({1, 1, 4}, type: :f32), Nx.tensor([[[1.0, 1.0]]]))
      #Nx.Tensor<
        f32[1][1][3]
        [
          [
            [1.0, 3.0, 5.0]
          ]
        ]
      >

  """
  def conv(input, kernel, opts \\ []) do
    opts =
      keyword!(opts, [
        :input_permutation,
        :kernel_permutation,
        :output_permutation,
        padding: :valid,
        strides: 1,
        input_dilation: 1,
        kernel_dilation: 1,
        feature_group_size: 1,
        batch_group_size: 1
      ])

    {input, kernel} = {to_tensor(input), to_tensor(kernel)}
    Nx.Shape.conv_ranks!(input.shape, kernel.shape)
    rank = tuple_size(input.shape)
    spatial = Kernel.max(rank - 2, 0)
    identity = Enum.to_list(0..(rank - 1)//1)
    in_perm = Keyword.get(opts, :input_permutation, identity)
    k_perm = Keyword.get(opts, :kernel_permutation, identity)
    out_perm = Keyword.get(opts, :output_permutation, identity)
    per_axis = fn key -> per_spatial_axis(Keyword.get(opts, key, 1), spatial) end
    fgs = Keyword.get(opts, :feature_group_size, 1)
    bgs = Keyword.get(opts, :batch_group_size, 1)

    unless is_integer(fgs) and fgs >= 1 and is_integer(bgs) and bgs >= 1 do
      raise ArgumentError,
            "conv expects positive integer group sizes, got feature_group_size: " <>
              "#{inspect(fgs)}, batch_group_size: #{inspect(bgs)}"
    end

    {canonical, padding} =
      Nx.Shape.conv(
        Nx.Shape.transpose(input.shape, in_perm, axis_names(input)),
        Nx.Shape.transpose(kernel.shape, k_perm, axis_names(kernel)),
        per_axis.(:strides),
        Keyword.get(opts, :padding, :valid),
        per_axis.(:input_dilation),
        per_axis.(:kernel_dilation),
        fgs,
        bgs
      )

    in_perm = Nx.Shape.normalize_axes(input.shape, in_perm, axis_names(input))
    # :output_permutation names the output's axes as :input_permutation names the input's
    # (integers or the input's axis names): the axis at position i of the result is the
    # canonical axis at the position of i in it, so the canonical result is transposed by
    # the inverse permutation (Nx's meaning)
    out_perm = Nx.Shape.normalize_axes(input.shape, out_perm, axis_names(input))
    inverse_out = inverse_permutation(out_perm)
    shape = Nx.Shape.transpose(canonical, inverse_out)
    type = Nx.Type.to_floating(Nx.Type.merge(input.type, kernel.type))

    wire = %{
      strides: per_axis.(:strides),
      padding: padding,
      input_dilation: per_axis.(:input_dilation),
      kernel_dilation: per_axis.(:kernel_dilation),
      feature_group_size: fgs,
      batch_group_size: bgs,
      input_permutation: in_perm,
      kernel_permutation: Nx.Shape.normalize_axes(kernel.shape, k_perm, axis_names(kernel)),
      output_permutation: out_perm
    }

    # the input's names, in canonical order, then in the output's (Nx's)
    names =
      axis_names(input)
      |> Nx.Shape.transpose_names(in_perm)
      |> Nx.Shape.transpose_names(inverse_out)

    apply_op(:conv, [input, kernel], wire, type, shape, names)
  end

  # the permutation that undoes `perm` (position i holds the index of i in `perm`)
  defp inverse_permutation(perm) do
    perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))
  end

  defp per_spatial_axis(value, spatial) when is_integer(value),
    do: List.duplicate(value, spatial)

  defp per_spatial_axis(value, _spatial), do: value

  ## Indexing

  @doc type: :indexed
  @doc """
  A static slice: `lengths[k]` elements along each axis from `start_indices[k]`, every
  `strides[k]`-th one (`:strides` is a list or one integer for all axes, 1 by default).
  Start indices are clamped so the slice stays in bounds, as in Nx.

  ## Examples

      iex> Nx.slice(Nx.tensor([1, 2, 3, 4, 5, 6]), [1], [4], strides: 2)
      #Nx.Tensor<
        s64[2]
        [2, 4]
      >

  """
  def slice(tensor, start_indices, lengths, opts \\ []) do
    opts = keyword!(opts, strides: 1)
    tensor = to_tensor(tensor)
    rank = tuple_size(tensor.shape)

    strides =
      case Keyword.get(opts, :strides, 1) do
        stride when is_integer(stride) -> List.duplicate(stride, rank)
        strides -> strides
      end

    if dynamic_starts?(start_indices) do
      dynamic_slice(tensor, start_indices, lengths, strides)
    else
      static_slice(tensor, start_indices, lengths, strides)
    end
  end

  # Start indices that are not all known numbers: a scalar integer tensor per axis.
  defp dynamic_starts?(starts),
    do: not Enum.all?(starts, &(is_integer(&1) or match?(%T{data: %Nx.BinaryBackend{}}, &1)))

  defp static_slice(tensor, start_indices, lengths, strides) do
    starts = Enum.map(start_indices, &static_index!/1)
    {starts, shape} = Nx.Shape.slice(tensor.shape, starts, lengths, strides)
    opts = %{start_indices: starts, lengths: lengths, strides: strides}
    apply_op(:slice, [tensor], opts, tensor.type, shape, axis_names(tensor))
  end

  defp static_index!(index) when is_integer(index), do: index

  defp static_index!(%T{data: %Nx.BinaryBackend{}, shape: {}} = index) do
    case to_number(index) do
      int when is_integer(int) -> int
      other -> raise ArgumentError, "slice start indices must be integers, got: #{other}"
    end
  end

  defp static_index!(other) do
    raise ArgumentError,
          "slice start indices must be integers (dynamic start indices are not supported), " <>
            "got: #{inspect(other)}"
  end

  defp dynamic_slice(tensor, starts, lengths, strides) do
    {_, shape} = Nx.Shape.slice(tensor.shape, List.duplicate(0, length(starts)), lengths, strides)

    starts = start_tensors!(starts, "slice")
    opts = %{lengths: lengths}
    names = axis_names(tensor)
    lengths_shape = List.to_tuple(lengths)
    out = apply_op(:dynamic_slice, [tensor | starts], opts, tensor.type, lengths_shape, names)

    if Enum.all?(strides, &(&1 == 1)) do
      out
    else
      zeros = List.duplicate(0, length(lengths))
      opts = %{start_indices: zeros, lengths: lengths, strides: strides}
      apply_op(:slice, [out], opts, tensor.type, shape, names)
    end
  end

  @doc type: :indexed
  @doc """
  A slice along one axis: `length` elements from `start_index` (an integer, or a scalar
  integer tensor for a dynamic start) on `:axis` (default 0), every `:strides`-th one
  (default 1); the other axes whole. The same as `slice/4` with those axes full.

  ## Examples

      iex> Nx.slice_along_axis(Nx.iota({2, 5}), 1, 3, axis: 1)
      #Nx.Tensor<
        s64[2][3]
        [
          [1, 2, 3],
          [6, 7, 8]
        ]
      >

      iex> Nx.slice_along_axis(Nx.tensor([0, 1, 2, 3, 4, 5]), 0, 6, strides: 2)
      #Nx.Tensor<
        s64[3]
        [0, 2, 4]
      >

  """
  def slice_along_axis(tensor, start_index, len, opts \\ []) do
    tensor = to_tensor(tensor)
    opts = keyword!(opts, strides: 1, axis: 0)
    axis = Nx.Shape.normalize_axis(tensor.shape, opts[:axis], axis_names(tensor))
    dims = Enum.with_index(Tuple.to_list(tensor.shape))
    at = fn k, here, other -> if k == axis, do: here, else: other end
    starts = for {_, k} <- dims, do: at.(k, start_index, 0)
    lengths = for {dim, k} <- dims, do: at.(k, len, dim)
    strides = for {_, k} <- dims, do: at.(k, opts[:strides], 1)
    slice(tensor, starts, lengths, strides: strides)
  end

  @doc type: :indexed
  @doc """
  Writes `slice` into `tensor` starting at `start_indices` (integers or scalar integer
  tensors, one per axis). Start indices are clamped so the slice fits, as in Nx. The output
  type merges both types.

  ## Examples

      iex> Nx.put_slice(Nx.tensor([0, 1, 2, 3, 4]), [3], Nx.tensor([7, 8]))
      #Nx.Tensor<
        s64[5]
        [0, 1, 2, 7, 8]
      >

      iex> Nx.put_slice(Nx.tensor([0, 1, 2, 3, 4]), [4], Nx.tensor([7, 8]))
      #Nx.Tensor<
        s64[5]
        [0, 1, 2, 7, 8]
      >

  """
  def put_slice(tensor, start_indices, slice) do
    {tensor, slice, type} = binary_args(tensor, slice)
    Nx.Shape.put_slice(tensor.shape, slice.shape)

    if length(start_indices) != tuple_size(tensor.shape) do
      raise ArgumentError,
            "put_slice expects one start index per axis (#{tuple_size(tensor.shape)}), " <>
              "got: #{inspect(start_indices)}"
    end

    starts = start_tensors!(start_indices, "put_slice")
    inputs = [as_type(tensor, type), as_type(slice, type) | starts]
    names = Nx.Shape.merge_names!(axis_names(tensor), axis_names(slice))
    apply_op(:put_slice, inputs, %{}, type, tensor.shape, names)
  end

  defp start_tensors!(starts, fun) do
    Enum.map(starts, fn start ->
      start = integer_tensor!(start, fun, "start indices")

      if start.shape != {} do
        raise ArgumentError,
              "#{fun} expects start indices to be scalars, got shape #{inspect(start.shape)}"
      end

      start
    end)
  end

  @doc type: :indexed
  @doc """
  Takes the entries at `indices` along `:axis` (0 by default): that axis is replaced by the
  dimensions of `indices`. An index out of range raises when `indices` is concrete; inside
  `defn` it is clamped into range.

  ## Examples

      iex> Nx.take(Nx.tensor([[1, 2], [3, 4]]), Nx.tensor([1, 0, 1]), axis: 1)
      #Nx.Tensor<
        s64[2][3]
        [
          [2, 1, 2],
          [4, 3, 4]
        ]
      >

  """
  def take(tensor, indices, opts \\ []) do
    opts = keyword!(opts, axis: 0)
    tensor = to_tensor(tensor)
    indices = integer_tensor!(indices, "take", "indices")
    axis = Nx.Shape.normalize_axis(tensor.shape, Keyword.get(opts, :axis, 0), axis_names(tensor))
    shape = Nx.Shape.take(tensor.shape, indices.shape, axis)
    indices_in_bounds!(indices, tensor.shape, [axis], &Nx.Shape.indices_in_bounds!/3)
    names = Nx.Shape.take_names(axis_names(tensor), axis_names(indices), axis)
    apply_op(:take, [tensor, indices], %{axis: axis}, tensor.type, shape, names)
  end

  @doc type: :indexed
  @doc """
  Takes, along `:axis` (0 by default), the entries at `indices`, which have the tensor's
  shape except along that axis; the output has the shape of `indices`. An index out of range
  raises when `indices` is concrete; inside `defn` it is clamped into range.

  ## Examples

      iex> t = Nx.tensor([[3, 1, 2], [6, 4, 5]])
      iex> Nx.take_along_axis(t, Nx.tensor([[1, 2], [0, 0]]), axis: 1)
      #Nx.Tensor<
        s64[2][2]
        [
          [1, 2],
          [6, 6]
        ]
      >

  """
  def take_along_axis(tensor, indices, opts \\ []) do
    opts = keyword!(opts, axis: 0)
    tensor = to_tensor(tensor)
    indices = integer_tensor!(indices, "take_along_axis", "indices")
    axis = Nx.Shape.normalize_axis(tensor.shape, Keyword.get(opts, :axis, 0), axis_names(tensor))
    shape = Nx.Shape.take_along_axis(tensor.shape, indices.shape, axis)
    indices_in_bounds!(indices, tensor.shape, [axis], &Nx.Shape.indices_in_bounds!/3)

    apply_op(
      :take_along_axis,
      [tensor, indices],
      %{axis: axis},
      tensor.type,
      shape,
      axis_names(tensor)
    )
  end

  @doc type: :indexed
  @doc """
  Reads the elements (or slices) at `indices`: the last dimension of `indices` holds one
  index per axis in `:axes` (by default the first `k` axes, `k` being that dimension). The
  output has the leading dimensions of `indices` followed by the dimensions not indexed.
  An index out of range raises when `indices` is concrete (as in Nx 0.7.2); inside `defn`
  indices are not known until run time and are clamped into range.

  ## Examples

      iex> t = Nx.tensor([[1, 2], [3, 4]])
      iex> Nx.gather(t, Nx.tensor([[1, 1], [0, 1], [1, 0]]))
      #Nx.Tensor<
        s64[3]
        [4, 2, 3]
      >
      iex> Nx.gather(t, Nx.tensor([[1]]), axes: [1])
      #Nx.Tensor<
        s64[1][2]
        [
          [2, 4]
        ]
      >

  """
  def gather(tensor, indices, opts \\ []) do
    opts = keyword!(opts, [:axes])
    tensor = to_tensor(tensor)
    indices = integer_tensor!(indices, "gather", "indices")
    axes = index_axes(tensor, indices, opts)
    shape = Nx.Shape.gather(tensor.shape, indices.shape, axes)
    indices_in_bounds!(indices, tensor.shape, axes, &Nx.Shape.gather_indices_in_bounds!/3)
    apply_op(:gather, [tensor, indices], %{axes: axes}, tensor.type, shape)
  end

  defp index_axes(tensor, indices, opts) do
    case opts[:axes] do
      nil ->
        k =
          if indices.shape == {}, do: 0, else: elem(indices.shape, tuple_size(indices.shape) - 1)

        if k > tuple_size(tensor.shape) do
          raise ArgumentError,
                "the last dimension of indices (#{k}) is larger than the rank of the tensor " <>
                  "(#{tuple_size(tensor.shape)})"
        end

        Enum.to_list(0..(k - 1)//1)

      axes ->
        Nx.Shape.normalize_axes(tensor.shape, axes, axis_names(tensor))
    end
  end

  @doc type: :indexed
  @doc """
  Adds `updates` into `tensor` at `indices` (as in `gather/3`, with the `:axes` option);
  repeated indices accumulate. The output type merges both types.

  ## Examples

      iex> Nx.indexed_add(Nx.tensor([1, 2, 3]), Nx.tensor([[0], [2], [0]]), Nx.tensor([10, 20, 30]))
      #Nx.Tensor<
        s64[3]
        [41, 2, 23]
      >

  """
  def indexed_add(tensor, indices, updates, opts \\ []),
    do: indexed(:indexed_add, tensor, indices, updates, opts)

  @doc type: :indexed
  @doc """
  Writes `updates` into `tensor` at `indices` (as in `gather/3`, with the `:axes` option).
  With repeated indices, which update wins is unspecified. The output type merges both
  types.

  ## Examples

      iex> Nx.indexed_put(Nx.tensor([1, 2, 3]), Nx.tensor([[0], [2]]), Nx.tensor([10, 20]))
      #Nx.Tensor<
        s64[3]
        [10, 2, 20]
      >

  """
  def indexed_put(tensor, indices, updates, opts \\ []),
    do: indexed(:indexed_put, tensor, indices, updates, opts)

  defp indexed(op, tensor, indices, updates, opts) do
    opts = keyword!(opts, [:axes])
    {tensor, updates, type} = binary_args(tensor, updates)
    indices = integer_tensor!(indices, op, "indices")
    axes = index_axes(tensor, indices, opts)
    Nx.Shape.indexed(tensor.shape, indices.shape, updates.shape, axes)
    indices_in_bounds!(indices, tensor.shape, axes, &Nx.Shape.gather_indices_in_bounds!/3)
    inputs = [as_type(tensor, type), indices, as_type(updates, type)]
    apply_op(op, inputs, %{axes: axes}, type, tensor.shape, axis_names(tensor))
  end

  ## Sorting

  defp sort_opts!(tensor, opts, fun) do
    if tensor.shape == {} do
      raise ArgumentError, "#{fun} expects a tensor with at least one dimension, got a scalar"
    end

    no_complex!(tensor, String.to_atom(fun), 2)
    axis = Nx.Shape.normalize_axis(tensor.shape, Keyword.get(opts, :axis, 0), axis_names(tensor))
    direction = Keyword.get(opts, :direction, :asc)

    unless direction in [:asc, :desc] do
      raise ArgumentError,
            "unknown value for :direction, expected :asc or :desc, got: #{inspect(direction)}"
    end

    %{axis: axis, direction: direction}
  end

  @doc type: :ndim
  @doc """
  Sorts the tensor along `:axis` (0 by default), `:direction` `:asc` (default) or `:desc`.

  ## Examples

      iex> Nx.sort(Nx.tensor([[3, 1, 2], [0, 5, 4]]), axis: 1, direction: :desc)
      #Nx.Tensor<
        s64[2][3]
        [
          [3, 2, 1],
          [5, 4, 0]
        ]
      >

  """
  def sort(tensor, opts \\ []) do
    opts = keyword!(opts, axis: 0, direction: :asc, stable: false)
    tensor = to_tensor(tensor)

    apply_op(
      :sort,
      [tensor],
      sort_opts!(tensor, opts, "sort"),
      tensor.type,
      tensor.shape,
      axis_names(tensor)
    )
  end

  @doc type: :ndim
  @doc """
  The indices that sort the tensor along `:axis` (0 by default), `:direction` `:asc`
  (default) or `:desc`. The sort is stable in both directions: equal elements keep their
  order. `:type` sets the integer output type (`{:s, 64}` by default); `:stable` is accepted
  (the sort is always stable).

  ## Examples

      iex> Nx.argsort(Nx.tensor([2, 1, 2, 0]), direction: :desc)
      #Nx.Tensor<
        s64[4]
        [0, 2, 1, 3]
      >

  """
  def argsort(tensor, opts \\ []) do
    opts = keyword!(opts, axis: 0, direction: :asc, stable: false, type: {:s, 64})
    tensor = to_tensor(tensor)
    type = Nx.Type.normalize!(Keyword.get(opts, :type, {:s, 64}))

    unless Nx.Type.integer?(type) do
      raise ArgumentError, "argsort expects an integer :type, got: #{inspect(type)}"
    end

    apply_op(
      :argsort,
      [tensor],
      sort_opts!(tensor, opts, "argsort"),
      type,
      tensor.shape,
      axis_names(tensor)
    )
  end

  @doc type: :ndim
  @doc """
  The `:k` (1 by default) largest values along the last axis and their indices:
  `{values, indices}` (indices `s64`; among equal values the lower index comes first).

  ## Examples

      iex> {values, indices} = Nx.top_k(Nx.tensor([1, 5, 3, 4, 2]), k: 2)
      iex> {Nx.to_flat_list(values), Nx.to_flat_list(indices)}
      {[5, 4], [1, 3]}

  """
  def top_k(tensor, opts \\ []) do
    tensor = to_tensor(tensor)
    k = Keyword.validate!(opts, k: 1)[:k]
    rank = tuple_size(tensor.shape)

    # Nx 0.7.2's checks and messages, in its order
    unless is_integer(k) and k >= 1 do
      raise ArgumentError, "top_k k must be an integer greater than or equal to 1, got k=#{k}"
    end

    if rank == 0 do
      raise ArgumentError, "top_k input must have at least rank 1"
    end

    last = elem(tensor.shape, rank - 1)

    if last < k do
      raise ArgumentError,
            "top_k input last axis size must be greater than or equal to k, got size=#{last} " <>
              "and k=#{k}"
    end

    composite(
      fn t ->
        indices =
          t
          |> argsort(axis: rank - 1, direction: :desc)
          |> slice_along_axis(0, k, axis: rank - 1)

        {take_along_axis(t, indices, axis: rank - 1), indices}
      end,
      [tensor]
    )
  end

  ## Fourier transforms

  @doc type: :ndim
  @doc """
  The discrete Fourier transform of `tensor` along its last axis (leading axes are a batch):
  `out[k] = sum_j x[j] * exp(-2 pi i j k / n)`, no normalization.

  The output is complex: `{:c, 128}` for `{:f, 64}` and `{:c, 128}` inputs, `{:c, 64}` for
  every other type (real inputs are converted to complex first).

  ## Options

    * `:length` - the transform size `n`: the last axis is padded with zeros or truncated to
      it. A positive integer, or `:power_of_two` for the next power of two at least the axis
      size. Defaults to the size of the last axis.
    * `:eps` - accepted for compatibility with Nx 0.7 and ignored (results are not rounded).

  ## Examples

      iex> Nx.fft(Nx.tensor([1, 1, 0, 0]))
      #Nx.Tensor<
        c64[4]
        [2.0+0.0i, 1.0-1.0i, 0.0+0.0i, 1.0+1.0i]
      >

      iex> Nx.fft(Nx.tensor([1.0, 1.0], type: :f64), length: 4)
      #Nx.Tensor<
        c128[4]
        [2.0+0.0i, 1.0-1.0i, 0.0+0.0i, 1.0+1.0i]
      >

      iex> Nx.fft(Nx.tensor([[1, 1, 0, 0, 2, 3], [1, 0, 0, 0, 2, 3]]), length: 4)
      #Nx.Tensor<
        c64[2][4]
        [
          [2.0+0.0i, 1.0-1.0i, 0.0+0.0i, 1.0+1.0i],
          [1.0+0.0i, 1.0+0.0i, 1.0+0.0i, 1.0+0.0i]
        ]
      >

      iex> Nx.fft(Nx.tensor(1.0))
      ** (ArgumentError) fft expects a tensor with at least one axis (it transforms the last axis), got a scalar; use Nx.reshape/2 or Nx.new_axis/2 to add one

  """
  def fft(tensor, opts \\ []), do: fourier(:fft, tensor, opts)

  @doc type: :ndim
  @doc """
  The inverse discrete Fourier transform of `tensor` along its last axis:
  `out[j] = (1 / n) * sum_k x[k] * exp(2 pi i j k / n)`, so `ifft(fft(x))` is `x`.

  Types, shapes and options as in `fft/2`: the output is complex, `:length` pads the last
  axis with zeros or truncates it before transforming, `:eps` is ignored.

  ## Examples

      iex> Nx.ifft(Nx.tensor([Complex.new(2, 0), Complex.new(1, -1), 0, Complex.new(1, 1)]))
      #Nx.Tensor<
        c64[4]
        [1.0+0.0i, 1.0+0.0i, 0.0+0.0i, 0.0+0.0i]
      >

      iex> Nx.ifft(Nx.tensor([4, 0, 0, 0, 0, 0]), length: 4)
      #Nx.Tensor<
        c64[4]
        [1.0+0.0i, 1.0+0.0i, 1.0+0.0i, 1.0+0.0i]
      >

  """
  def ifft(tensor, opts \\ []), do: fourier(:ifft, tensor, opts)

  # Nx 0.7.2 checks the FFT options with Keyword.validate!/2 (Elixir's wording), so do we.
  defp fourier(op, tensor, opts) do
    tensor = to_tensor(tensor)
    opts = Keyword.validate!(opts, [:length, axis: -1, eps: 1.0e-10])
    rank = tuple_size(tensor.shape)

    axis =
      if rank > 0,
        do: Nx.Shape.normalize_axis(tensor.shape, opts[:axis], axis_names(tensor)),
        else: -1

    if axis in [-1, rank - 1] do
      shape = Nx.Shape.fft(tensor.shape, opts[:length], Atom.to_string(op))
      length = elem(shape, tuple_size(shape) - 1)
      type = Nx.Type.to_complex(tensor.type)
      apply_op(op, [tensor], %{length: length}, type, shape, axis_names(tensor))
    else
      # the transform runs along the last axis: bring `axis` there and back (one graph)
      perm = Enum.to_list(0..(rank - 1)) |> List.replace_at(axis, rank - 1)
      perm = List.replace_at(perm, rank - 1, axis)
      inner = [length: opts[:length], eps: opts[:eps]]

      one_graph([tensor], fn t ->
        t |> transpose(axes: perm) |> then(&fourier(op, &1, inner)) |> transpose(axes: perm)
      end)
    end
  end

  @doc type: :ndim
  @doc """
  The 2-D discrete Fourier transform: `fft/2` along the two `:axes` (the last two by
  default), each padded or cut to its entry of `:lengths`.

  ## Options

    * `:axes` - the two axes; `[-2, -1]` by default
    * `:lengths` - a length (or `:power_of_two`) per axis; the axes' sizes by default
    * `:eps` - accepted for Nx's sake (the worker does not clean results up)

  ## Examples

      iex> Nx.fft2(Nx.tensor([[1, 0], [0, 1]]))
      #Nx.Tensor<
        c64[2][2]
        [
          [2.0+0.0i, 0.0+0.0i],
          [0.0+0.0i, 2.0+0.0i]
        ]
      >

  """
  def fft2(tensor, opts \\ []), do: fourier2(:fft, tensor, opts)

  @doc type: :ndim
  @doc """
  The inverse of `fft2/2` (same options): `ifft/2` along the two `:axes`.

  ## Examples

      iex> Nx.ifft2(Nx.tensor([[2, 0], [0, 2]]))
      #Nx.Tensor<
        c64[2][2]
        [
          [1.0+0.0i, 0.0+0.0i],
          [0.0+0.0i, 1.0+0.0i]
        ]
      >

  """
  def ifft2(tensor, opts \\ []), do: fourier2(:ifft, tensor, opts)

  defp fourier2(op, tensor, opts) do
    tensor = to_tensor(tensor)
    opts = Keyword.validate!(opts, [:lengths, axes: [-2, -1], eps: 1.0e-10])
    rank = tuple_size(tensor.shape)

    if rank < 2 do
      raise ArgumentError, "expected a tensor with rank > 1, got tensor with rank #{rank}"
    end

    [ax1, ax2] =
      case opts[:axes] do
        [_, _] = axes ->
          Nx.Shape.normalize_axes(tensor.shape, axes, axis_names(tensor))

        axes ->
          raise ArgumentError, "expected :axes to be a list with 2 axes, got: #{inspect(axes)}"
      end

    [l1, l2] =
      case opts[:lengths] do
        nil ->
          [nil, nil]

        [l1, l2] = lengths
        when (is_integer(l1) or l1 == :power_of_two) and (is_integer(l2) or l2 == :power_of_two) ->
          lengths

        lengths ->
          raise ArgumentError,
                "expected :lengths to be a list of lengths or :power_of_two, got: " <>
                  inspect(lengths)
      end

    one_graph([tensor], fn t ->
      t
      |> then(&fourier(op, &1, length: l2, axis: ax2))
      |> then(&fourier(op, &1, length: l1, axis: ax1))
    end)
  end

  ## Serialization

  @doc type: :conversion
  @doc """
  Serializes a tensor, a number or a container of them (`Nx.Container`) to iodata in Nx's
  binary format (the bytes Nx 0.7.2 writes, so either side reads the other's). Axis names
  and vectorized axes are kept; struct fields a container does not keep come back as their
  defaults. `opts` are those of `:erlang.term_to_iovec/2` for the description of the data,
  such as `compressed: 9`. Lazy containers are not accepted: make their tensors first.
  Use `IO.iodata_to_binary/1` for one binary.

  Not available inside `defn` (the tensors must have data).

  ## Examples

      iex> data = Nx.serialize({Nx.tensor([1, 2, 3], names: [:x]), %{b: 2.5}})
      iex> {a, %{b: b}} = Nx.deserialize(data)
      iex> a
      #Nx.Tensor<
        s64[x: 3]
        [1, 2, 3]
      >
      iex> b
      #Nx.Tensor<
        f32
        2.5
      >

  """
  def serialize(tensor_or_container, opts \\ []),
    do: Nx.Serialization.serialize(tensor_or_container, opts)

  @doc type: :conversion
  @doc """
  Rebuilds what `serialize/2` wrote, from iodata; also reads the format of Nx 0.5 and
  earlier. `opts` are those of `:erlang.binary_to_term/2`, such as `[:safe]`. Numbers come
  back as tensors.

  Not available inside `defn`.

  ## Examples

      iex> v = Nx.vectorize(Nx.tensor([[1], [2]]), :x)
      iex> Nx.deserialize(Nx.serialize(v))
      #Nx.Tensor<
        vectorized[x: 2]
        s64[1]
        [
          [1],
          [2]
        ]
      >

      iex> Nx.deserialize(<<"nx", 2, 0>>)
      ** (ArgumentError) cannot deserialize Nx format v2

  """
  def deserialize(data, opts \\ []), do: Nx.Serialization.deserialize(data, opts)

  @doc type: :conversion
  @doc """
  Reads the contents of a NumPy `.npy` file (format versions 1.0 to 3.0) as a tensor:
  unsigned and signed integers and floats, in either byte order, in C or Fortran order.

  Not available inside `defn`.

  ## Examples

      iex> header = "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }"
      iex> npy = <<0x93, "NUMPY", 1, 0, byte_size(header)::16-little, header::binary, 1, 0, 2, 1>>
      iex> Nx.load_numpy!(npy)
      #Nx.Tensor<
        u16[2]
        [1, 258]
      >

      iex> Nx.load_numpy!("not numpy")
      ** (ArgumentError) unable to parse NumPy file, it may be corrupted or invalid

  """
  def load_numpy!(data), do: Nx.NumPy.load!(data)

  @doc type: :conversion
  @doc """
  Reads a NumPy `.npz` archive (a zip file of `.npy` files, compressed or not) as a list of
  `{name, tensor}` in the archive's order, each name without its `.npy`. Use `Map.new/1`
  to look tensors up by name.

  Not available inside `defn`.

  ## Examples

      iex> Nx.load_numpy_archive!("not a zip file")
      ** (ArgumentError) unable to parse NumPy archive, it may be corrupted or invalid

  """
  def load_numpy_archive!(archive), do: Nx.NumPy.load_archive!(archive)

  ## Helpers

  defp unnamed(shape), do: List.duplicate(nil, tuple_size(shape))

  # The axis names of a tensor, one per axis (a tensor built without names has none named).
  defp axis_names(%T{names: names, shape: shape}) when length(names) == tuple_size(shape),
    do: names

  defp axis_names(%T{shape: shape}), do: unnamed(shape)

  # `names` are the output's axis names, computed by the op beside its shape (Nx.Shape's
  # `*_names` rules); an op that gives none has its axes unnamed.
  defp apply_op(op, inputs, opts, type, shape, names \\ nil) do
    names = if names && length(names) == tuple_size(shape), do: names, else: unnamed(shape)
    out = %T{data: nil, type: type, shape: shape, names: names}
    Nx.Defn.Expr.apply_op(op, inputs, opts, out)
  end

  defp broadcast_names(%T{} = left, %T{} = right),
    do:
      Nx.Shape.binary_broadcast_names(
        left.shape,
        axis_names(left),
        right.shape,
        axis_names(right)
      )

  # Converts a number to a scalar tensor of `type` (weak typing of numbers).
  defp weak(%T{} = tensor, _type), do: tensor

  # as in Nx 0.7.2, a float number next to a tensor is first an f32 (a complex one a c64), then
  # written in the merged type: `Nx.multiply(f64 tensor, 0.1)` multiplies by 0.10000000149011612
  defp weak(number, type) when is_float(number), do: tensor(as_f32(number), type: type)

  defp weak(%Complex{re: re, im: im}, type),
    do: tensor(Complex.new(as_f32(re), as_f32(im)), type: type)

  defp weak(number, type), do: tensor(number, type: type)

  defp as_f32(x) when is_float(x) do
    [y] = x |> Nx.BinaryBackend.number_to_binary({:f, 32}) |> Nx.BinaryBackend.to_list({:f, 32})
    y
  end

  defp as_f32(other), do: other

  # Both arguments of a binary op as tensors, plus their merged type.
  defp binary_args(%T{} = left, %T{} = right),
    do: {left, right, Nx.Type.merge(left.type, right.type)}

  defp binary_args(%T{} = left, right) do
    if is_scalar_value(right) do
      type = Nx.Type.merge_number(left.type, right)
      {left, weak(right, type), type}
    else
      binary_args(left, to_tensor(right))
    end
  end

  defp binary_args(left, %T{} = right) do
    if is_scalar_value(left) do
      type = Nx.Type.merge_number(right.type, left)
      {weak(left, type), right, type}
    else
      binary_args(to_tensor(left), right)
    end
  end

  defp binary_args(left, right) do
    {left, right} = {to_tensor(left), to_tensor(right)}
    {left, right, Nx.Type.merge(left.type, right.type)}
  end

  # Comparisons: an integer number next to an integer tensor stays s64, so it is not
  # wrapped into a narrower type before comparing.
  defp compare_args(%T{} = left, right) when is_integer(right) do
    if Nx.Type.integer?(left.type), do: {left, to_tensor(right)}, else: pair(left, right)
  end

  defp compare_args(left, %T{} = right) when is_integer(left) do
    if Nx.Type.integer?(right.type), do: {to_tensor(left), right}, else: pair(left, right)
  end

  defp compare_args(left, right), do: pair(left, right)

  defp pair(left, right) do
    {left, right, _} = binary_args(left, right)
    {left, right}
  end

  defp output_type(:same, type), do: type
  defp output_type(:float, type), do: Nx.Type.to_floating(type)
  defp output_type(:aggregate, type), do: Nx.Type.to_aggregate(type)
  defp output_type(:abs, {:c, _} = type), do: Nx.Type.to_real(type)
  defp output_type(:abs, type), do: type

  # Options are checked with Nx.Defn.Kernel.keyword!/2, whose error reads as Nx 0.7.2's
  # ("unknown key :axis in [axis: 1], expected one of [:axes, :keep_axes]"); the keys are
  # listed in Nx 0.7.2's order, so the message is the same.
  defp keyword!(opts, keys), do: Nx.Defn.Kernel.keyword!(opts, keys)

  # (Nx 0.7.2's message, word for word: Nx's own tests assert it)
  defp no_complex!(%T{type: type} = tensor, name, arity) do
    if Nx.Type.complex?(type) do
      raise ArgumentError, "Nx.#{name}/#{arity} does not support complex inputs"
    end

    tensor
  end

  # (Nx 0.7.2's wording: the bitwise ops share one message, quotient has its own)
  defp integer_only!(type, name) do
    unless Nx.Type.integer?(type) do
      subject =
        cond do
          name == "quotient/2" -> "quotient expects"
          String.contains?(name, ":type") -> "Nx.#{name} expects"
          true -> "bitwise operators expect"
        end

      raise ArgumentError,
            "#{subject} integer tensors as inputs and outputs an integer tensor, " <>
              "got: #{inspect(type)}"
    end

    type
  end

  # the names a shape argument given as a tensor brings (reshape/broadcast/iota take them)
  defp shape_names(%T{} = tensor), do: axis_names(tensor)
  defp shape_names(_shape), do: nil

  # a shape, or a tensor or number whose shape it is (a number's is {}), as in Nx 0.7.2
  defp shape_of(%T{shape: shape}), do: shape
  defp shape_of(shape) when is_tuple(shape), do: shape
  defp shape_of(number) when is_number(number) or is_struct(number, Complex), do: {}

  defp shape_of(other) do
    raise ArgumentError,
          "expected a shape. A shape is a n-element tuple with the size of each dimension. " <>
            "Alternatively, you can pass a tensor (or a number) and the shape will be " <>
            "retrieved from the tensor. Got: #{inspect(other)}"
  end

  # Runs `fun` over `args` as one graph: traced inline inside defn, one worker call eagerly.
  defp composite(fun, args), do: Nx.Defn.Compiler.jit_apply(fun, args, [])

  # grad/2 differentiates an integer input through a float copy of it, which marks the type
  # it had. Indices computed from such copies (i, or i * 2) are integers in Nx, and were so
  # in the trace of the value: here they are that integer type again, with a zero gradient.
  defp integer_tensor!(%T{data: %Nx.Defn.Expr{}, type: {kind, _}} = tensor, fun, what)
       when kind in [:f, :bf] do
    case Nx.Defn.Expr.integer_input_type(tensor) do
      nil -> integer_type!(tensor, fun, what)
      type -> as_type(tensor, type)
    end
  end

  defp integer_tensor!(tensor, fun, what), do: integer_type!(to_tensor(tensor), fun, what)

  defp integer_type!(tensor, fun, what) do
    unless Nx.Type.integer?(tensor.type) do
      # Nx 0.7.2's wording for the indices of the gather and scatter families
      message =
        case fun do
          op when op in [:indexed_add, :indexed_put] ->
            "indices must be an integer tensor, got type: #{inspect(tensor.type)}"

          op when op in ["gather", "take", "take_along_axis"] ->
            "indices must be an integer tensor, got #{inspect(tensor.type)}"

          _ ->
            "#{fun} expects #{what} to be an integer tensor, got one of type " <>
              "#{Nx.Type.to_string(tensor.type)}. Convert it with Nx.as_type/2"
        end

      raise ArgumentError, message
    end

    tensor
  end

  # Concrete index values out of range raise, as in Nx 0.7.2 (eagerly); `check` is the
  # Nx.Shape rule that words the error for the offending row of indices.
  defp indices_in_bounds!(indices, shape, [_ | _] = axes, check) do
    limits = List.to_tuple(for axis <- axes, do: elem(shape, axis))
    if row = out_of_range_row(indices, limits), do: check.(shape, axes, row)
    :ok
  end

  # The row (`tuple_size(limits)` consecutive elements) that holds the first element of an
  # integer tensor outside `[0, limit)` (Nx.BinaryBackend.first_out_of_range/3), or nil. Only
  # a tensor whose bytes are in Elixir memory is read, in one pass and with no round trip to
  # the worker; a traced (defn) or resident tensor gives nil: its values are not known here.
  defp out_of_range_row(%T{data: %Nx.BinaryBackend{state: bytes}, type: type}, limits) do
    with i when is_integer(i) <- Nx.BinaryBackend.first_out_of_range(bytes, type, limits) do
      {n, width} = {tuple_size(limits), Nx.Type.byte_size(type)}
      row = binary_part(bytes, (i - rem(i, n)) * width, n * width)
      Nx.BinaryBackend.to_list(row, type)
    end
  end

  defp out_of_range_row(%T{}, _limits), do: nil

  # Runs `fun` (built from other ops) as one graph: inlined while tracing, one worker call
  # otherwise.
  defp one_graph(tensors, fun) do
    Nx.Defn.Compiler.jit_apply(fun, tensors, [])
  end

  # every combination of one value per axis (`per_axis` gives an axis' values), row-major
  defp positions(axes, per_axis) do
    Enum.reduce(Enum.reverse(axes), [[]], fn axis, rest ->
      for v <- per_axis.(axis), r <- rest, do: [v | r]
    end)
  end
end
