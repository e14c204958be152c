defmodule Nx.Shape do
  @moduledoc """
  Shape rules: every function takes shapes (tuples of positive dimensions) and returns
  the output shape of an operation, raising `ArgumentError` with an Nx-style message when the
  shapes do not fit.
  """

  @doc """
  Validates a shape: a tuple of positive integer dimensions (Nx 0.7.2 has no empty tensors).

  ## Examples

      iex> Nx.Shape.validate!({2, 3})
      {2, 3}
      iex> Nx.Shape.validate!({2, 0})
      ** (ArgumentError) invalid dimension in axis 1 found in shape. Each dimension must be a positive integer, got 0 in shape {2, 0}

  """
  def validate!(shape) when is_tuple(shape) do
    shape
    |> Tuple.to_list()
    |> Enum.with_index()
    |> Enum.each(fn {dim, axis} ->
      if is_struct(dim, Nx.Tensor) do
        raise ArgumentError, """
        invalid dimension in axis #{axis} found in shape. Each dimension must be a positive \
        integer, but a tensor was given as a dimension: #{inspect(dim)}

        This happens if you are trying to pass a dimension or a shape as an argument to a \
        defn function: defn's arguments are all traced as tensors. Pass the dimension as an \
        option instead (`defn f(opts \\\\ []), do: Nx.iota({opts[:size]})`, called as \
        `f(size: 10)`), which stays an integer.

        Invalid shape: #{inspect(shape)}
        """
      end

      unless is_integer(dim) and dim > 0 do
        raise ArgumentError,
              "invalid dimension in axis #{axis} found in shape. " <>
                "Each dimension must be a positive integer, got #{inspect(dim)} " <>
                "in shape #{inspect(shape)}"
      end
    end)

    shape
  end

  def validate!(other) do
    raise ArgumentError, "invalid shape #{inspect(other)}, expected a tuple of dimensions"
  end

  @doc """
  The number of elements of a shape.

  ## Examples

      iex> Nx.Shape.size({2, 3})
      6
      iex> Nx.Shape.size({})
      1

  """
  def size(shape), do: shape |> Tuple.to_list() |> Enum.reduce(1, &*/2)

  @doc """
  The number of dimensions of a shape.

  ## Examples

      iex> Nx.Shape.rank({2, 3})
      2

  """
  def rank(shape), do: tuple_size(shape)

  @doc """
  Normalizes an axis (negative axes count from the end) and checks that it is in range.
  With the tensor's axis `names`, an atom is the axis of that name.

  ## Examples

      iex> Nx.Shape.normalize_axis({2, 3}, -1)
      1
      iex> Nx.Shape.normalize_axis({2, 3}, :y, [:x, :y])
      1
      iex> Nx.Shape.normalize_axis({2, 3}, 2)
      ** (ArgumentError) given axis (2) invalid for shape with rank 2

      iex> Nx.Shape.normalize_axis({2, 3}, :z, [:x, :y])
      ** (ArgumentError) name :z not found in tensor with names [:x, :y]

  """
  def normalize_axis(shape, axis, names \\ nil)

  def normalize_axis(shape, axis, _names) when is_integer(axis) do
    rank = tuple_size(shape)
    normalized = if axis < 0, do: rank + axis, else: axis

    if normalized < 0 or normalized >= rank do
      raise ArgumentError, "given axis (#{axis}) invalid for shape with rank #{rank}"
    end

    normalized
  end

  def normalize_axis(_shape, nil, _names), do: raise(ArgumentError, "axis name cannot be nil")

  def normalize_axis(shape, axis, names) when is_atom(axis) do
    names = names || List.duplicate(nil, tuple_size(shape))

    Enum.find_index(names, &(&1 == axis)) ||
      raise ArgumentError,
            "name #{inspect(axis)} not found in tensor with names #{inspect(names)}"
  end

  def normalize_axis(_shape, axis, _names) do
    raise ArgumentError, "expected an integer axis, got: #{inspect(axis)}"
  end

  @doc """
  Normalizes a list of axes (integers, or names given the tensor's `names`), which must be
  unique.

  ## Examples

      iex> Nx.Shape.normalize_axes({2, 3, 4}, [-1, 0])
      [2, 0]
      iex> Nx.Shape.normalize_axes({2, 3, 4}, [:c, 0], [:a, :b, :c])
      [2, 0]
      iex> Nx.Shape.normalize_axes({2, 3}, [0, 0])
      ** (ArgumentError) axes [0, 0] must be unique integers between 0 and 1

  """
  def normalize_axes(shape, axes, names \\ nil)

  def normalize_axes(shape, axes, names) when is_list(axes) do
    normalized = Enum.map(axes, &normalize_axis(shape, &1, names))

    if length(Enum.uniq(normalized)) != length(normalized) do
      raise ArgumentError,
            "axes #{inspect(axes)} must be unique integers between 0 and #{tuple_size(shape) - 1}"
    end

    normalized
  end

  def normalize_axes(_shape, axes, _names) do
    raise ArgumentError, "expected a list of axes, got: #{inspect(axes)}"
  end

  ## Axis names: one entry per axis, an atom or nil, computed beside each shape rule

  @doc """
  The axis names given by a `names:` option for `shape`: `nil` means every axis unnamed;
  a list must have one entry per axis.

  ## Examples

      iex> Nx.Shape.named_axes!(nil, {2, 3})
      [nil, nil]
      iex> Nx.Shape.named_axes!([:x, nil], {2, 3})
      [:x, nil]
      iex> Nx.Shape.named_axes!([:x], {2, 3})
      ** (ArgumentError) invalid names for tensor of rank 2, when specifying names every dimension must have a name or be nil

  """
  def named_axes!(nil, shape), do: List.duplicate(nil, tuple_size(shape))

  def named_axes!(names, shape) do
    unless is_list(names) and length(names) == tuple_size(shape) and Enum.all?(names, &is_atom/1) do
      raise ArgumentError,
            "invalid names for tensor of rank #{tuple_size(shape)}, when specifying names " <>
              "every dimension must have a name or be nil"
    end

    names
  end

  @doc """
  The names of the result of a broadcasting binary op: aligned on the right as the shapes;
  on each axis `nil` takes the other side's name, two different names raise.

  ## Examples

      iex> Nx.Shape.binary_broadcast_names({1, 2}, [nil, :y], {2, 1}, [:x, nil])
      [:x, :y]
      iex> Nx.Shape.binary_broadcast_names({2, 3}, [:x, :y], {3}, [nil])
      [:x, :y]
      iex> Nx.Shape.binary_broadcast_names({2}, [:x], {2}, [:y])
      ** (ArgumentError) cannot merge name :x on axis 0 with name :y on axis 0

  """
  def binary_broadcast_names(left_shape, left_names, right_shape, right_names) do
    rank = max(tuple_size(left_shape), tuple_size(right_shape))
    merge_names!(pad_names(left_names, rank), pad_names(right_names, rank))
  end

  defp pad_names(names, rank), do: List.duplicate(nil, rank - length(names)) ++ names

  @doc """
  Merges two lists of names of the same length axis by axis (`nil` takes the other name;
  two different names raise), as for the operands of `put_slice` and `concatenate`.

  ## Examples

      iex> Nx.Shape.merge_names!([:x, nil], [nil, :y])
      [:x, :y]

  """
  def merge_names!(left, right) do
    left
    |> Enum.zip(right)
    |> Enum.with_index()
    |> Enum.map(fn
      {{nil, name}, _axis} ->
        name

      {{name, nil}, _axis} ->
        name

      {{name, name}, _axis} ->
        name

      {{l, r}, axis} ->
        raise ArgumentError,
              "cannot merge name #{inspect(l)} on axis #{axis} with name #{inspect(r)} " <>
                "on axis #{axis}"
    end)
  end

  @doc """
  The names of a concatenation along `axis`: the first tensor's; the names of every axis
  must agree (`nil` agrees with any), else Nx's error naming the concatenation axis.

  ## Examples

      iex> Nx.Shape.concatenate_names([[:a, nil], [nil, :b]], 0)
      [:a, nil]
      iex> Nx.Shape.concatenate_names([[:a, nil], [:c, nil]], 1)
      ** (ArgumentError) cannot merge name :c on axis 1 with name :a on axis 1

  """
  def concatenate_names([first | _] = names_list, axis) do
    for per_axis <- Enum.zip(names_list) do
      Enum.reduce(Tuple.to_list(per_axis), fn name, acc ->
        case {name, acc} do
          {nil, acc} ->
            acc

          {name, nil} ->
            name

          {name, name} ->
            name

          {name, acc} ->
            raise ArgumentError,
                  "cannot merge name #{inspect(name)} on axis #{axis} with name " <>
                    "#{inspect(acc)} on axis #{axis}"
        end
      end)
    end

    first
  end

  @doc """
  The names of `take/3`'s result: the tensor's axes before and after `axis`, and in its
  place the indices' axes (a vector of indices keeps the taken axis's name, merged with its
  own).

  ## Examples

      iex> Nx.Shape.take_names([:x, :y], [nil], 1)
      [:x, :y]
      iex> Nx.Shape.take_names([:x, :y], [:i, :j], 1)
      [:x, :i, :j]

  """
  def take_names(names, indices_names, axis) do
    {leading, [axis_name | trailing]} = Enum.split(names, axis)

    middle =
      case indices_names do
        [name] when axis_name == nil or name == nil or axis_name == name ->
          [axis_name || name]

        [name] ->
          raise ArgumentError,
                "cannot merge name #{inspect(axis_name)} on axis #{axis} with name " <>
                  "#{inspect(name)} on axis 0"

        names ->
          names
      end

    leading ++ middle ++ trailing
  end

  @doc """
  The names after reducing `axes` (normalized; `nil` means all): reduced axes are dropped,
  or kept (with their names) when `keep_axes` is true.

  ## Examples

      iex> Nx.Shape.reduce_names([:x, :y], [0], false)
      [:y]
      iex> Nx.Shape.reduce_names([:x, :y], nil, true)
      [:x, :y]

  """
  def reduce_names(names, _axes, true), do: names
  def reduce_names(_names, nil, false), do: []

  def reduce_names(names, axes, false),
    do: for({name, i} <- Enum.with_index(names), i not in axes, do: name)

  @doc """
  The names after a transpose by the (normalized) permutation `axes`.

  ## Examples

      iex> Nx.Shape.transpose_names([:a, :b, :c], [2, 0, 1])
      [:c, :a, :b]

  """
  def transpose_names(names, axes), do: Enum.map(axes, &Enum.at(names, &1))

  @doc """
  The names after a new axis named `name` is inserted at (normalized) position `axis`.

  ## Examples

      iex> Nx.Shape.new_axis_names([:x, :y], 1, :n)
      [:x, :n, :y]

  """
  def new_axis_names(names, axis, name), do: List.insert_at(names, axis, name)

  @doc """
  The names of a general dot product (`dot/6`'s layout: batch axes, named as on the left,
  then the free axes of each side); a name appearing twice raises.

  ## Examples

      iex> Nx.Shape.dot_names([:x, :y], [1], [], [:k, :z], [0], [])
      [:x, :z]
      iex> Nx.Shape.dot_names([:x, :y], [1], [], [:k, :x], [0], [])
      ** (ArgumentError) operation would result in duplicate names [:x, :x], please rename your tensors to avoid duplicates

  """
  def dot_names(n1, c1, b1, n2, c2, b2) do
    free = fn names, used ->
      for {name, i} <- Enum.with_index(names), i not in used, do: name
    end

    names = Enum.map(b1, &Enum.at(n1, &1)) ++ free.(n1, c1 ++ b1) ++ free.(n2, c2 ++ b2)
    named = Enum.reject(names, &is_nil/1)

    if length(Enum.uniq(named)) != length(named) do
      raise ArgumentError,
            "operation would result in duplicate names #{inspect(names)}, " <>
              "please rename your tensors to avoid duplicates"
    end

    names
  end

  @doc """
  The shape two shapes broadcast to (aligned on the right; each pair of dimensions equal or
  one of them 1).

  ## Examples

      iex> Nx.Shape.binary_broadcast({2, 3}, {3})
      {2, 3}
      iex> Nx.Shape.binary_broadcast({4, 1}, {1, 5})
      {4, 5}
      iex> Nx.Shape.binary_broadcast({2, 3}, {4})
      ** (ArgumentError) cannot broadcast tensor of dimensions {2, 3} to {4}

  """
  def binary_broadcast(shape, shape), do: shape

  def binary_broadcast(left, right) do
    rank = max(tuple_size(left), tuple_size(right))
    l = pad_leading(left, rank)
    r = pad_leading(right, rank)

    Enum.zip_with(l, r, fn
      d, d -> d
      1, d -> d
      d, 1 -> d
      _, _ -> raise_broadcast(left, right)
    end)
    |> List.to_tuple()
  end

  defp raise_broadcast(left, right) do
    raise ArgumentError,
          "cannot broadcast tensor of dimensions #{inspect(left)} to #{inspect(right)}"
  end

  defp pad_leading(shape, rank) do
    List.duplicate(1, rank - tuple_size(shape)) ++ Tuple.to_list(shape)
  end

  @doc """
  The default broadcast axes from `shape` to `new_shape`: the trailing axes.

  ## Examples

      iex> Nx.Shape.broadcast_axes({3}, {2, 3})
      [1]
      iex> Nx.Shape.broadcast_axes({3}, {})
      ** (ArgumentError) cannot broadcast tensor of dimensions {3} to {}

  """
  def broadcast_axes(shape, new_shape) do
    rank = tuple_size(shape)
    new_rank = tuple_size(new_shape)

    if rank > new_rank do
      raise_broadcast(shape, new_shape)
    end

    Enum.to_list((new_rank - rank)..(new_rank - 1)//1)
  end

  @doc """
  Validates broadcasting `shape` to `new_shape` where input axis `k` goes to output axis
  `axes[k]`; returns `new_shape`.

  ## Examples

      iex> Nx.Shape.broadcast({3}, {2, 3}, [1])
      {2, 3}
      iex> Nx.Shape.broadcast({2}, {2, 3}, [0])
      {2, 3}
      iex> Nx.Shape.broadcast({3}, {2, 3}, [0])
      ** (ArgumentError) cannot broadcast tensor of dimensions {3} to {2, 3} with axes [0]

  """
  def broadcast(shape, new_shape, axes) do
    validate!(new_shape)

    ok? =
      length(axes) == tuple_size(shape) and
        Enum.all?(axes, &(is_integer(&1) and &1 >= 0 and &1 < tuple_size(new_shape))) and
        axes == Enum.sort(Enum.uniq(axes)) and
        shape
        |> Tuple.to_list()
        |> Enum.zip(axes)
        |> Enum.all?(fn {dim, axis} -> dim == 1 or dim == elem(new_shape, axis) end)

    unless ok? do
      raise ArgumentError,
            "cannot broadcast tensor of dimensions #{inspect(shape)} " <>
              "to #{inspect(new_shape)} with axes #{inspect(axes)}"
    end

    new_shape
  end

  @doc """
  The shape after reducing `axes` (`nil` means all); reduced axes are removed, or kept with
  size 1 when `keep_axes` is true; axes may be named given the tensor's `names`. Returns
  `{shape, normalized_axes}`.

  ## Examples

      iex> Nx.Shape.reduce({2, 3}, nil, false)
      {{}, nil}
      iex> Nx.Shape.reduce({2, 3}, [-1], false)
      {{2}, [1]}
      iex> Nx.Shape.reduce({2, 3}, [0], true)
      {{1, 3}, [0]}
      iex> Nx.Shape.reduce({2, 3}, [2], false)
      ** (ArgumentError) given axis (2) invalid for shape with rank 2

  """
  def reduce(shape, axes, keep_axes, names \\ nil)

  def reduce(shape, nil, keep_axes, _names) do
    if keep_axes do
      {List.to_tuple(List.duplicate(1, tuple_size(shape))), nil}
    else
      {{}, nil}
    end
  end

  def reduce(shape, axes, keep_axes, names) do
    axes = shape |> normalize_axes(axes, names) |> Enum.sort()

    dims =
      shape
      |> Tuple.to_list()
      |> Enum.with_index()
      |> Enum.flat_map(fn {dim, i} ->
        cond do
          i not in axes -> [dim]
          keep_axes -> [1]
          true -> []
        end
      end)

    {List.to_tuple(dims), axes}
  end

  @doc """
  The output shape of a window operation (`Nx.window_sum/3`, `Nx.window_scatter_max/5`, ...)
  and its wire options, with the padding resolved into `{low, high}` pairs.

  `window_dimensions` is a tuple with one positive size per axis; `strides` and `dilations`
  are a positive integer for every axis or a list; `padding` is `:valid`, `:same` (the output
  has `ceil(dim / stride)` elements, the padding split with the smaller half first) or a list
  of non-negative `{low, high}` pairs. Output dimension `k` is
  `div(dim + low + high - dilated_window, stride) + 1`, where the dilated window is
  `(window - 1) * dilation + 1`.

  ## Examples

      iex> {shape, config} = Nx.Shape.window({4, 4}, {2, 2}, 2, :valid, 1)
      iex> {shape, config.padding}
      {{2, 2}, [{0, 0}, {0, 0}]}
      iex> Nx.Shape.window({5}, {3}, [2], :same, [1]) |> elem(0)
      {3}
      iex> Nx.Shape.window({5}, {3}, [2], :same, [1]) |> elem(1) |> Map.fetch!(:padding)
      [{1, 1}]
      iex> Nx.Shape.window({4, 4}, {2}, 1, :valid, 1)
      ** (ArgumentError) invalid window dimensions, rank of shape (2) does not match rank of window (1)

      iex> Nx.Shape.window({2}, {3}, 1, :valid, 1)
      ** (ArgumentError) window dimensions would result in empty tensor which is not supported, got the window {3} (dilated to [3]) over the padded shape [2]

  """
  def window(shape, window_dimensions, strides, padding, dilations) do
    rank = tuple_size(shape)

    window =
      case window_dimensions do
        dims when is_tuple(dims) and tuple_size(dims) == rank ->
          Tuple.to_list(dims)

        dims when is_tuple(dims) ->
          raise ArgumentError,
                "invalid window dimensions, rank of shape (#{rank}) does not match rank of " <>
                  "window (#{tuple_size(dims)})"

        other ->
          raise ArgumentError,
                "expected the window dimensions to be a tuple, got: #{inspect(other)}"
      end

    window = positive_per_axis!(window, rank, "window dimensions")
    strides = positive_per_axis!(strides, rank, "strides")
    dilations = positive_per_axis!(dilations, rank, "window dilations")
    dilated = Enum.zip_with(window, dilations, fn w, d -> (w - 1) * d + 1 end)
    dims = Tuple.to_list(shape)
    padding = window_padding(padding, dims, dilated, strides)
    padded = Enum.zip_with(dims, padding, fn n, {lo, hi} -> n + lo + hi end)

    if Enum.zip(padded, dilated) |> Enum.any?(fn {n, w} -> n < w end) do
      raise ArgumentError,
            "window dimensions would result in empty tensor which is not supported, got the " <>
              "window #{inspect(window_dimensions)} (dilated to #{inspect(dilated)}) over " <>
              "the padded shape #{inspect(padded)}"
    end

    out = Enum.zip_with([padded, dilated, strides], fn [n, w, s] -> div(n - w, s) + 1 end)

    config = %{
      window_dimensions: window,
      strides: strides,
      padding: padding,
      window_dilations: dilations
    }

    {List.to_tuple(out), config}
  end

  defp positive_per_axis!(value, rank, _name) when is_integer(value) and value >= 1,
    do: List.duplicate(value, rank)

  defp positive_per_axis!(list, rank, name) when is_list(list) do
    cond do
      length(list) != rank ->
        raise ArgumentError,
              "invalid #{name}, rank of shape (#{rank}) does not match rank of " <>
                "#{name} (#{length(list)})"

      Enum.all?(list, &(is_integer(&1) and &1 >= 1)) ->
        list

      true ->
        raise ArgumentError, "#{name} must be positive integers, got: #{inspect(list)}"
    end
  end

  defp positive_per_axis!(other, _rank, name) do
    raise ArgumentError,
          "#{name} must be a positive integer or a list of them, got: #{inspect(other)}"
  end

  defp window_padding(:valid, dims, _dilated, _strides), do: Enum.map(dims, fn _ -> {0, 0} end)

  defp window_padding(:same, dims, dilated, strides) do
    Enum.zip_with([dims, dilated, strides], fn [n, w, s] ->
      out = div(n + s - 1, s)
      total = max((out - 1) * s + w - n, 0)
      {div(total, 2), total - div(total, 2)}
    end)
  end

  defp window_padding(pairs, dims, _dilated, _strides) when is_list(pairs) do
    # Nx 0.7.2's checks and wording, then ours for negative pairs
    unless Enum.all?(pairs, &match?({lo, hi} when is_integer(lo) and is_integer(hi), &1)) do
      raise ArgumentError,
            "padding must be a list of {high, low} tuples, where each element is an integer. " <>
              "Got: #{inspect(pairs)}"
    end

    if length(pairs) != length(dims) do
      raise ArgumentError,
            "invalid padding configuration, rank of padding configuration and shape must match"
    end

    unless Enum.all?(pairs, fn {lo, hi} -> lo >= 0 and hi >= 0 end) do
      raise ArgumentError,
            "invalid padding configuration, expected :valid, :same or one {low, high} pair " <>
              "of non-negative integers per axis (#{length(dims)}), got: #{inspect(pairs)}"
    end

    pairs
  end

  defp window_padding(other, _dims, _dilated, _strides), do: raise_padding_mode(other)

  @doc """
  The shape after permuting the axes: output axis `k` is input axis `axes[k]`.

  ## Examples

      iex> Nx.Shape.transpose({2, 3, 4}, [2, 0, 1])
      {4, 2, 3}
      iex> Nx.Shape.transpose({2, 3}, [0])
      ** (ArgumentError) expected length of permutation (1) to match rank of shape (2)

  """
  def transpose(shape, axes, names \\ nil) do
    rank = tuple_size(shape)

    if length(axes) != rank do
      raise ArgumentError,
            "expected length of permutation (#{length(axes)}) to match rank of shape (#{rank})"
    end

    axes = normalize_axes(shape, axes, names)
    axes |> Enum.map(&elem(shape, &1)) |> List.to_tuple()
  end

  @doc """
  Validates a reshape and resolves one `:auto` dimension.

  ## Examples

      iex> Nx.Shape.reshape({2, 3}, {3, 2})
      {3, 2}
      iex> Nx.Shape.reshape({2, 3}, {:auto, 2})
      {3, 2}
      iex> Nx.Shape.reshape({2, 3}, {4})
      ** (ArgumentError) cannot reshape, current shape {2, 3} is not compatible with new shape {4}

  """
  def reshape(old_shape, new_shape) when is_tuple(new_shape) do
    dims = Tuple.to_list(new_shape)

    new_shape =
      case Enum.count(dims, &(&1 == :auto)) do
        0 ->
          validate!(new_shape)

        1 ->
          known = dims |> Enum.reject(&(&1 == :auto)) |> Enum.reduce(1, &*/2)
          old_size = size(old_shape)

          # as Nx 0.7.2: the :auto size is the quotient; when it is 0 the message shows
          # the shape without it, otherwise the size check below shows the inferred shape
          inferred = if known == 0, do: 0, else: div(old_size, known)

          if inferred == 0 do
            raise ArgumentError,
                  "cannot reshape, current shape #{inspect(old_shape)} " <>
                    "is not compatible with new shape " <>
                    inspect(dims |> Enum.reject(&(&1 == :auto)) |> List.to_tuple())
          end

          dims
          |> Enum.map(fn
            :auto -> inferred
            dim -> dim
          end)
          |> List.to_tuple()
          |> validate!()

        _ ->
          raise ArgumentError,
                "only one dimension can be :auto in new shape, got: #{inspect(new_shape)}"
      end

    if size(old_shape) != size(new_shape) do
      raise ArgumentError,
            "cannot reshape, current shape #{inspect(old_shape)} " <>
              "is not compatible with new shape #{inspect(new_shape)}"
    end

    new_shape
  end

  @doc """
  Validates a static slice. Start indices are clamped so the slice stays in bounds, as Nx
  does. Returns `{start_indices, output_shape}`; output dimension `k` is
  `ceil(lengths[k] / strides[k])`.

  ## Examples

      iex> Nx.Shape.slice({5}, [1], [3], [1])
      {[1], {3}}
      iex> Nx.Shape.slice({5}, [4], [3], [1])
      {[2], {3}}
      iex> Nx.Shape.slice({6, 4}, [0, 0], [6, 4], [2, 3])
      {[0, 0], {3, 2}}
      iex> Nx.Shape.slice({3}, [0], [4], [1])
      ** (ArgumentError) length at axis 0 must be less than or equal to axis size of 3, got: 4

  """
  def slice(shape, start_indices, lengths, strides) do
    rank = tuple_size(shape)

    for {name, list} <- [start_indices: start_indices, lengths: lengths, strides: strides],
        length(list) != rank do
      raise ArgumentError,
            "#{name} must have the same length as the rank of the tensor (#{rank}), " <>
              "got: #{inspect(list)}"
    end

    triples = Enum.zip([Tuple.to_list(shape), start_indices, lengths, strides])

    {starts, dims} =
      triples
      |> Enum.with_index()
      |> Enum.map(fn {{dim, start, len, stride}, axis} ->
        unless is_integer(start), do: raise_slice("start index", axis, start)
        unless is_integer(len) and len >= 0, do: raise_slice("length", axis, len)
        unless is_integer(stride) and stride >= 1, do: raise_slice("stride", axis, stride)

        if len > dim do
          raise ArgumentError,
                "length at axis #{axis} must be less than or equal to axis size of #{dim}, " <>
                  "got: #{len}"
        end

        {start |> max(0) |> min(dim - len), div(len + stride - 1, stride)}
      end)
      |> Enum.unzip()

    {starts, List.to_tuple(dims)}
  end

  defp raise_slice(what, axis, value) do
    raise ArgumentError, "invalid #{what} at axis #{axis} for slice, got: #{inspect(value)}"
  end

  @doc """
  The shape of concatenating `shapes` along `axis` (already normalized).

  ## Examples

      iex> Nx.Shape.concatenate([{2, 3}, {4, 3}], 0)
      {6, 3}
      iex> Nx.Shape.concatenate([{2, 3}, {2, 2}], 0)
      ** (ArgumentError) expected all shapes to match {*, 3}, got unmatching shape: {2, 2}

  """
  def concatenate([first | rest] = shapes, axis) do
    # Nx 0.7.2's message: the first shape with `*` on the axis
    template =
      first
      |> Tuple.to_list()
      |> Enum.with_index(fn
        _, ^axis -> "*"
        dim, _ -> Integer.to_string(dim)
      end)
      |> Enum.join(", ")

    for shape <- rest,
        tuple_size(shape) != tuple_size(first) or
          Tuple.delete_at(shape, axis) != Tuple.delete_at(first, axis) do
      raise ArgumentError,
            "expected all shapes to match {#{template}}, got unmatching shape: #{inspect(shape)}"
    end

    put_elem(first, axis, shapes |> Enum.map(&elem(&1, axis)) |> Enum.sum())
  end

  @doc """
  The output shape of a general dot product: batch dimensions, then the free dimensions of
  the left side, then those of the right side. Axes must already be normalized.

  ## Examples

      iex> Nx.Shape.dot({2, 3}, [1], [], {3, 4}, [0], [])
      {2, 4}
      iex> Nx.Shape.dot({5, 2, 3}, [2], [0], {5, 3, 4}, [1], [0])
      {5, 2, 4}
      iex> Nx.Shape.dot({2, 3}, [1], [], {4, 5}, [0], [])
      ** (ArgumentError) dot/zip expects shapes to be compatible, dimension 1 of left-side (3) does not equal dimension 0 of right-side (4)

  """
  def dot(s1, c1, b1, s2, c2, b2) do
    dot_batch_axes!(s1, c1, b1, s2, c2, b2)

    if length(c1) != length(c2) do
      raise ArgumentError,
            "dot expects the same number of contraction axes on both sides, " <>
              "got: #{inspect(c1)} and #{inspect(c2)}"
    end

    for {a1, a2} <- Enum.zip(c1 ++ b1, c2 ++ b2), elem(s1, a1) != elem(s2, a2) do
      raise ArgumentError,
            "dot/zip expects shapes to be compatible, dimension #{a1} of left-side " <>
              "(#{elem(s1, a1)}) does not equal dimension #{a2} of right-side (#{elem(s2, a2)})"
    end

    batch = Enum.map(b1, &elem(s1, &1))
    free1 = free_dims(s1, c1 ++ b1)
    free2 = free_dims(s2, c2 ++ b2)
    List.to_tuple(batch ++ free1 ++ free2)
  end

  # Nx 0.7.2's rules and messages: both sides batched or neither, the batch axes the leading
  # ones (0, 1, ...) in order, of the same sizes, and none of them contracted
  defp dot_batch_axes!(_s1, _c1, [], _s2, _c2, []), do: :ok

  defp dot_batch_axes!(_s1, _c1, [], _s2, _c2, _b2),
    do: raise(ArgumentError, "left tensor must be batched if right tensor is batched")

  defp dot_batch_axes!(_s1, _c1, _b1, _s2, _c2, []),
    do: raise(ArgumentError, "right tensor must be batched if left tensor is batched")

  defp dot_batch_axes!(s1, c1, b1, s2, c2, b2) do
    leading = Enum.to_list(0..(length(b1) - 1))

    for {axes, side} <- [{b1, "left"}, {b2, "right"}], axes != leading do
      raise ArgumentError,
            "invalid dot batch axis for the #{side} tensor, batch axes must be successive " <>
              "dimensions starting from 0, got #{inspect(axes)}"
    end

    {sizes1, sizes2} = {Enum.map(b1, &elem(s1, &1)), Enum.map(b2, &elem(s2, &1))}

    # (Nx's message lacks the space before "and")
    if sizes1 != sizes2 do
      raise ArgumentError,
            "dot batch dimension sizes must match, but the left batch dimension of axes " <>
              "#{inspect(b1)} has dimension sizes #{inspect(sizes1)}and the right batch " <>
              "dimension of axes #{inspect(b2)} has sizes #{inspect(sizes2)}"
    end

    for {batch, contract, side} <- [{b1, c1, "left"}, {b2, c2, "right"}],
        Enum.any?(batch, &(&1 in contract)) do
      raise ArgumentError,
            "dot batch axes for #{side} tensor (#{inspect(batch)}) cannot be in contract " <>
              "axes (#{inspect(contract)})"
    end

    :ok
  end

  defp free_dims(shape, used) do
    for {dim, i} <- Enum.with_index(Tuple.to_list(shape)), i not in used, do: dim
  end

  @doc """
  The shape without the given axes, each of which must have size 1.

  ## Examples

      iex> Nx.Shape.squeeze({1, 2, 1}, [0, 2])
      {2}
      iex> Nx.Shape.squeeze({1, 2}, [1])
      ** (ArgumentError) cannot squeeze dimensions whose sizes are not 1, got 2 for dimension 1

  """
  def squeeze(shape, axes) do
    for axis <- axes, elem(shape, axis) != 1 do
      raise ArgumentError,
            "cannot squeeze dimensions whose sizes are not 1, " <>
              "got #{elem(shape, axis)} for dimension #{axis}"
    end

    shape
    |> Tuple.to_list()
    |> Enum.with_index()
    |> Enum.reject(fn {_, i} -> i in axes end)
    |> Enum.map(&elem(&1, 0))
    |> List.to_tuple()
  end

  @doc """
  The shape with a new axis of size 1 inserted at `axis` (negative counts from the end of
  the new shape).

  ## Examples

      iex> Nx.Shape.new_axis({2, 3}, 0)
      {1, 2, 3}
      iex> Nx.Shape.new_axis({2, 3}, -1)
      {2, 3, 1}

  """
  def new_axis(shape, axis) do
    rank = tuple_size(shape)
    normalized = if axis < 0, do: rank + 1 + axis, else: axis

    if normalized < 0 or normalized > rank do
      raise ArgumentError,
            "new axis position for shape #{inspect(shape)} must be a number between " <>
              "#{-rank - 1} and #{rank}, got: #{axis}"
    end

    Tuple.insert_at(shape, normalized, 1)
  end

  ## Shape, indexing and linear algebra rules

  @doc """
  The shape after padding: `padding_config` has one `{low, high, interior}` per axis; `low`
  and `high` may be negative (they remove elements), `interior` (between elements) must not.

  ## Examples

      iex> Nx.Shape.pad({3}, [{1, 2, 0}])
      {6}
      iex> Nx.Shape.pad({2, 3}, [{0, 0, 1}, {-1, 1, 0}])
      {3, 3}
      iex> Nx.Shape.pad({3}, [{0, 0, -1}])
      ** (ArgumentError) invalid padding configuration [{0, 0, -1}] for shape {3}, expected one {low, high, interior} per axis with interior >= 0 and a non-negative resulting dimension

  """
  def pad(shape, padding_config) when is_list(padding_config) do
    dims = Tuple.to_list(shape)

    valid? =
      length(padding_config) == length(dims) and
        Enum.all?(
          padding_config,
          &match?(
            {lo, hi, i} when is_integer(lo) and is_integer(hi) and is_integer(i) and i >= 0,
            &1
          )
        )

    new_dims =
      if valid? do
        Enum.zip_with(dims, padding_config, fn dim, {lo, hi, interior} ->
          dim + lo + hi + max(dim - 1, 0) * interior
        end)
      end

    if not valid? or Enum.any?(new_dims, &(&1 < 0)) do
      raise ArgumentError,
            "invalid padding configuration #{inspect(padding_config)} for shape " <>
              "#{inspect(shape)}, expected one {low, high, interior} per axis with " <>
              "interior >= 0 and a non-negative resulting dimension"
    end

    List.to_tuple(new_dims)
  end

  @doc """
  Checks that `slice_shape` fits into `shape` (same rank, no larger dimension), for
  `Nx.put_slice/3`.

  ## Examples

      iex> Nx.Shape.put_slice({3, 4}, {2, 4})
      {3, 4}
      iex> Nx.Shape.put_slice({3}, {4})
      ** (ArgumentError) slice shape {4} must fit in the tensor shape {3} (same rank, each dimension at most the tensor's)

  """
  def put_slice(shape, slice_shape) do
    fits? =
      tuple_size(shape) == tuple_size(slice_shape) and
        Enum.all?(Enum.zip(Tuple.to_list(shape), Tuple.to_list(slice_shape)), fn {d, s} ->
          s <= d
        end)

    unless fits? do
      raise ArgumentError,
            "slice shape #{inspect(slice_shape)} must fit in the tensor shape #{inspect(shape)} " <>
              "(same rank, each dimension at most the tensor's)"
    end

    shape
  end

  @doc """
  The shape of `Nx.gather/3`: indices of shape `{..., k}` pick elements (or slices) along
  the `k` normalized `axes`; the output has the leading dimensions of the indices, then
  the dimensions of `shape` not in `axes`.

  ## Examples

      iex> Nx.Shape.gather({3, 4}, {5, 2}, [0, 1])
      {5}
      iex> Nx.Shape.gather({3, 4}, {5, 1}, [1])
      {5, 3}
      iex> Nx.Shape.gather({3, 4}, {5, 3}, [0, 1])
      ** (ArgumentError) expected the last dimension of indices {5, 3} to be the number of indexed axes (2, axes: [0, 1])

  """
  def gather(shape, indices_shape, axes) do
    indices_last!(indices_shape, axes)
    batch = indices_shape |> Tuple.delete_at(tuple_size(indices_shape) - 1) |> Tuple.to_list()
    List.to_tuple(batch ++ free_dims(shape, axes))
  end

  @doc """
  Checks the updates of `Nx.indexed_add/4` and `Nx.indexed_put/4`: their shape must be the
  shape `gather/3` would return for the same indices. Returns `shape`.

  ## Examples

      iex> Nx.Shape.indexed({3, 4}, {2, 2}, {2}, [0, 1])
      {3, 4}
      iex> Nx.Shape.indexed({3, 4}, {2, 2}, {3}, [0, 1])
      ** (ArgumentError) expected updates of shape {2} for indices of shape {2, 2} into a tensor of shape {3, 4} (axes: [0, 1]), got {3}

  """
  def indexed(shape, indices_shape, updates_shape, axes) do
    expected = gather(shape, indices_shape, axes)

    if updates_shape != expected do
      raise ArgumentError,
            "expected updates of shape #{inspect(expected)} for indices of shape " <>
              "#{inspect(indices_shape)} into a tensor of shape #{inspect(shape)} " <>
              "(axes: #{inspect(axes)}), got #{inspect(updates_shape)}"
    end

    shape
  end

  @doc """
  Checks concrete indices of `Nx.take/3` and `Nx.take_along_axis/3` (`axes` is `[axis]`) and,
  through `gather_indices_in_bounds!/3`, of the gather and scatter families: `values` are
  the indices' elements in row-major order, every consecutive `length(axes)` of them one
  position along `axes` of `shape`. The first one out of range raises (no negative index
  counts from the end here). Returns `:ok`.

  ## Examples

      iex> Nx.Shape.indices_in_bounds!({2, 3}, [1], [2, 0])
      :ok
      iex> Nx.Shape.indices_in_bounds!({2, 3}, [1], [2, -1])
      ** (ArgumentError) index -1 is out of bounds for axis 1 in shape {2, 3}

  """
  def indices_in_bounds!(_shape, [], _values), do: :ok

  def indices_in_bounds!(shape, axes, values) do
    dims = Enum.map(axes, &{&1, elem(shape, &1)})

    values
    |> Enum.chunk_every(length(dims))
    |> Enum.each(fn position ->
      Enum.zip_with(position, dims, fn index, {axis, dim} ->
        if index < 0 or index >= dim do
          raise ArgumentError,
                "index #{index} is out of bounds for axis #{axis} in shape #{inspect(shape)}"
        end
      end)
    end)
  end

  @doc """
  Checks concrete indices of `Nx.gather/3`, `Nx.indexed_add/4` and `Nx.indexed_put/4` as
  `indices_in_bounds!/3` does. The message names the axis as Nx 0.7.2 does, which moves the
  indexed `axes` to the front first: the axis is the position within `axes`, the shape the
  one with `axes` in front.

  ## Examples

      iex> Nx.Shape.gather_indices_in_bounds!({2, 3}, [0, 1], [1, 2, 0, -1])
      ** (ArgumentError) index -1 is out of bounds for axis 1 in shape {2, 3}

      iex> Nx.Shape.gather_indices_in_bounds!({2, 3}, [1], [5])
      ** (ArgumentError) index 5 is out of bounds for axis 0 in shape {3, 2}

  """
  def gather_indices_in_bounds!(shape, axes, values) do
    rest = Enum.to_list(0..(tuple_size(shape) - 1)//1) -- axes
    front = List.to_tuple(for axis <- axes ++ rest, do: elem(shape, axis))
    indices_in_bounds!(front, Enum.to_list(0..(length(axes) - 1)//1), values)
  end

  defp indices_last!(indices_shape, axes) do
    rank = tuple_size(indices_shape)

    if rank == 0 or elem(indices_shape, rank - 1) != length(axes) do
      raise ArgumentError,
            "expected the last dimension of indices #{inspect(indices_shape)} to be the number " <>
              "of indexed axes (#{length(axes)}, axes: #{inspect(axes)})"
    end
  end

  @doc """
  The shape of `Nx.take/3`: the axis is replaced by the dimensions of the indices.

  ## Examples

      iex> Nx.Shape.take({3, 4}, {2, 5}, 1)
      {3, 2, 5}
      iex> Nx.Shape.take({3, 4}, {}, 0)
      {4}

  """
  def take(shape, indices_shape, axis) do
    {before, [_ | rest]} = Enum.split(Tuple.to_list(shape), axis)
    List.to_tuple(before ++ Tuple.to_list(indices_shape) ++ rest)
  end

  @doc """
  The shape of `Nx.take_along_axis/3`: the indices' shape, which must equal the tensor's
  except along `axis`.

  ## Examples

      iex> Nx.Shape.take_along_axis({3, 4}, {3, 2}, 1)
      {3, 2}
      iex> Nx.Shape.take_along_axis({3, 4}, {2, 2}, 1)
      ** (ArgumentError) indices of shape {2, 2} must have the shape of the tensor {3, 4} on every axis but 1

  """
  def take_along_axis(shape, indices_shape, axis) do
    if tuple_size(shape) != tuple_size(indices_shape) or
         Tuple.delete_at(shape, axis) != Tuple.delete_at(indices_shape, axis) do
      raise ArgumentError,
            "indices of shape #{inspect(indices_shape)} must have the shape of the tensor " <>
              "#{inspect(shape)} on every axis but #{axis}"
    end

    indices_shape
  end

  @doc """
  The output shape and the explicit padding of a convolution (`Nx.conv/3`), for shapes
  already permuted to `{batch, features, spatial...}` (input) and
  `{out_features, in_features, spatial...}` (kernel). `padding` is `:valid`, `:same` or a
  list of `{low, high}`; the result is `{shape, [{low, high}]}` with the output in the
  same canonical layout.

  ## Examples

      iex> Nx.Shape.conv({1, 1, 4, 4}, {3, 1, 2, 2}, [1, 1], :valid, [1, 1], [1, 1], 1, 1)
      {{1, 3, 3, 3}, [{0, 0}, {0, 0}]}
      iex> Nx.Shape.conv({1, 1, 5}, {1, 1, 3}, [2], :same, [1], [1], 1, 1)
      {{1, 1, 3}, [{1, 1}]}
      iex> Nx.Shape.conv({1, 2, 5}, {1, 3, 3}, [1], :valid, [1], [1], 1, 1)
      ** (ArgumentError) size of input channels divided by feature groups must match size of kernel channels, got 2 / 1 != 3 for shapes {1, 2, 5} and {1, 3, 3}

  """
  def conv(input, kernel, strides, padding, input_dilation, kernel_dilation, fgs, bgs) do
    # the checks and their wording follow Nx 0.7.2's, in its order (its tests match them)
    conv_ranks!(input, kernel)
    rank = tuple_size(input)
    spatial = rank - 2

    if tuple_size(kernel) != rank do
      raise ArgumentError,
            "conv expects input and kernel of the same rank, got shapes #{inspect(input)} " <>
              "and #{inspect(kernel)}"
    end

    if not is_list(strides) or length(strides) != spatial do
      raise ArgumentError,
            "rank of strides much match rank of spatial dimensions got strides " <>
              "#{inspect(strides)} with rank #{if is_list(strides), do: length(strides), else: 0}" <>
              " and got input shape #{inspect(input)} of rank #{spatial}"
    end

    conv_dilation!(input_dilation, "input", spatial)
    conv_dilation!(kernel_dilation, "kernel", spatial)

    unless Enum.all?(strides, &(is_integer(&1) and &1 >= 1)) do
      raise ArgumentError, "strides must be positive integers, got #{inspect(strides)}"
    end

    [n, c | in_spatial] = Tuple.to_list(input)
    [o, i | k_spatial] = Tuple.to_list(kernel)

    cond do
      bgs != 1 and fgs != 1 ->
        raise ArgumentError,
              "either batch groups or feature groups must be 1, got batch_groups = #{bgs} " <>
                "and feature_groups = #{fgs}"

      rem(n, bgs) != 0 ->
        raise ArgumentError,
              "batch groups must evenly divide input batch size got rem(#{bgs}, #{n}) != 0"

      rem(o, fgs) != 0 ->
        raise ArgumentError,
              "size of kernel output channels must be evenly divisible by feature groups got " <>
                "rem(#{o}, #{fgs}) != 0 for kernel with shape #{inspect(kernel)}"

      rem(o, bgs) != 0 ->
        raise ArgumentError,
              "size of kernel output channels must be evenly divisible by batch groups got " <>
                "rem(#{o}, #{bgs}) != 0 for kernel with shape #{inspect(kernel)}"

      c != i * fgs ->
        raise ArgumentError,
              "size of input channels divided by feature groups must match size of kernel " <>
                "channels, got #{c} / #{fgs} != #{i} for shapes #{inspect(input)} and " <>
                "#{inspect(kernel)}"

      true ->
        :ok
    end

    k_dilated = Enum.zip_with(k_spatial, kernel_dilation, &((&1 - 1) * &2 + 1))
    in_dilated = Enum.zip_with(in_spatial, input_dilation, &max((&1 - 1) * &2 + 1, 0))

    padding =
      case padding do
        :valid ->
          List.duplicate({0, 0}, spatial)

        :same ->
          Enum.map(k_dilated, fn k -> {div(k - 1, 2), k - 1 - div(k - 1, 2)} end)

        list when is_list(list) and length(list) == spatial ->
          if Enum.all?(list, &match?({lo, hi} when is_integer(lo) and is_integer(hi), &1)),
            do: list,
            else: raise_padding_mode(list)

        other ->
          raise_padding_mode(other)
      end

    out_spatial =
      [in_dilated, k_dilated, padding, strides]
      |> Enum.zip()
      |> Enum.map(fn {d, k, {lo, hi}, s} ->
        padded = d + lo + hi

        if padded < k do
          raise ArgumentError,
                "conv: the padded input (#{padded}) is smaller than the dilated kernel (#{k}) " <>
                  "for shapes #{inspect(input)} and #{inspect(kernel)}"
        end

        div(padded - k, s) + 1
      end)

    {List.to_tuple([div(n, bgs), o | out_spatial]), padding}
  end

  defp raise_padding_mode(padding) do
    raise ArgumentError,
          "invalid padding mode specified, padding must be one of :valid, :same, or a padding " <>
            "configuration, got: #{inspect(padding)}"
  end

  @doc false
  # Nx 0.7.2 checks the ranks first, before any option
  def conv_ranks!(input, kernel) do
    for {shape, what} <- [{input, "input"}, {kernel, "kernel"}], tuple_size(shape) < 3 do
      raise ArgumentError,
            "#{what} shape in conv requires at least rank 3, shape #{inspect(shape)} has " <>
              "rank #{tuple_size(shape)}"
    end

    :ok
  end

  defp conv_dilation!(dilation, what, spatial) do
    cond do
      not is_list(dilation) ->
        raise ArgumentError,
              "#{what} dilation must be a positive integer or list of positive integers, " <>
                "got " <> inspect(dilation)

      length(dilation) != spatial ->
        raise ArgumentError,
              "must specify dilation for each spatial dimension of the #{what} or specify an " <>
                "integer dilation factor"

      not Enum.all?(dilation, &(is_integer(&1) and &1 >= 1)) ->
        raise ArgumentError,
              "#{what} dilation of each dimension must be a positive integer, got " <>
                inspect(dilation)

      true ->
        :ok
    end
  end

  @doc """
  Checks that `shape` is a matrix, or a batch of them (rank >= 2), square when `square?`;
  `fun` names the function, whose Nx 0.7.2 message is raised otherwise. Returns `shape`.

  ## Examples

      iex> Nx.Shape.matrix!({2, 3, 3}, true, "cholesky")
      {2, 3, 3}
      iex> Nx.Shape.matrix!({2, 3}, true, "cholesky")
      ** (ArgumentError) tensor must be a square matrix or a batch of square matrices, got shape: {2, 3}

      iex> Nx.Shape.matrix!({3}, false, "qr")
      ** (ArgumentError) tensor must have at least rank 2, got rank 1 with shape {3}

  """
  def matrix!(shape, square?, fun) do
    rank = tuple_size(shape)

    cond do
      rank < 2 ->
        raise ArgumentError, matrix_message(fun, :rank, shape)

      square? and elem(shape, rank - 1) != elem(shape, rank - 2) ->
        raise ArgumentError, matrix_message(fun, :square, shape)

      true ->
        shape
    end
  end

  # Nx 0.7.2 words these per function
  defp matrix_message("triangular_solve", :rank, _shape),
    do: "incompatible dimensions for a and b on triangular solve"

  defp matrix_message("triangular_solve", :square, shape),
    do:
      "triangular_solve/3 expected a square matrix or a batch of square matrices, got tensor " <>
        "with shape: #{inspect(shape)}"

  defp matrix_message("solve", _, shape),
    do:
      "`a` tensor has incompatible dimensions, expected a square matrix or a batch of square " <>
        "matrices, got: #{inspect(shape)}"

  defp matrix_message("invert", _, shape),
    do:
      "invert/1 expects a square matrix or a batch of square matrices, got tensor with shape: " <>
        inspect(shape)

  defp matrix_message("determinant", _, shape),
    do:
      "determinant/1 expects a square tensor, got tensor with shape: " <>
        inspect(Tuple.to_list(shape))

  defp matrix_message(_fun, :rank, shape),
    do:
      "tensor must have at least rank 2, got rank #{tuple_size(shape)} with shape " <>
        inspect(shape)

  defp matrix_message(_fun, :square, shape),
    do:
      "tensor must be a square matrix or a batch of square matrices, got shape: " <>
        inspect(shape)

  @doc """
  The output shapes `{eigenvalues, eigenvectors}` of `Nx.LinAlg.eigh/2` for a square matrix or
  a batch of them, `{..., n, n}`: `{..., n}` and `{..., n, n}`. Errors are worded as Nx 0.7.2's.

  ## Examples

      iex> Nx.Shape.eigh({2, 3, 3})
      {{2, 3}, {2, 3, 3}}
      iex> Nx.Shape.eigh({2, 3})
      ** (ArgumentError) tensor must be a square matrix or a batch of square matrices, got shape: {2, 3}

      iex> Nx.Shape.eigh({3})
      ** (ArgumentError) tensor must have at least rank 2, got rank 1 with shape {3}

  """
  def eigh(shape) when tuple_size(shape) >= 2 do
    rank = tuple_size(shape)
    n = elem(shape, rank - 1)

    unless elem(shape, rank - 2) == n do
      raise ArgumentError,
            "tensor must be a square matrix or a batch of square matrices, got shape: " <>
              inspect(shape)
    end

    {Tuple.delete_at(shape, rank - 1), shape}
  end

  def eigh(shape) do
    raise ArgumentError,
          "tensor must have at least rank 2, got rank #{tuple_size(shape)} with shape " <>
            inspect(shape)
  end

  @doc """
  The output shape of `fft`/`ifft` (`fun` names the function for error messages): the last
  axis becomes `length` long. `length` is `nil` (keep the axis size), a positive integer
  (the axis is padded with zeros or truncated to it) or `:power_of_two` (the next power of two
  at least the axis size).

  ## Examples

      iex> Nx.Shape.fft({2, 6}, 4, "fft")
      {2, 4}
      iex> Nx.Shape.fft({5}, :power_of_two, "fft")
      {8}
      iex> Nx.Shape.fft({3}, nil, "ifft")
      {3}
      iex> Nx.Shape.fft({}, nil, "fft")
      ** (ArgumentError) fft expects a tensor with at least one axis (it transforms the last axis), got a scalar; use Nx.reshape/2 or Nx.new_axis/2 to add one

      iex> Nx.Shape.fft({4}, 0, "fft")
      ** (ArgumentError) fft expects :length to be a positive integer or :power_of_two, got: 0

  """
  def fft(shape, length, fun) do
    rank = tuple_size(shape)

    if rank == 0 do
      raise ArgumentError,
            "#{fun} expects a tensor with at least one axis (it transforms the last axis), " <>
              "got a scalar; use Nx.reshape/2 or Nx.new_axis/2 to add one"
    end

    size = elem(shape, rank - 1)

    n =
      case length do
        n when is_integer(n) and n > 0 ->
          n

        nil when size > 0 ->
          size

        :power_of_two when size > 0 ->
          next_power_of_two(size, 1)

        _ when length in [nil, :power_of_two] ->
          raise_empty_fft(shape, fun)

        _ ->
          raise ArgumentError,
                "#{fun} expects :length to be a positive integer or " <>
                  ":power_of_two, got: #{inspect(length)}"
      end

    put_elem(shape, rank - 1, n)
  end

  defp next_power_of_two(size, p) when p >= size, do: p
  defp next_power_of_two(size, p), do: next_power_of_two(size, p * 2)

  defp raise_empty_fft(shape, fun) do
    raise ArgumentError,
          "#{fun} cannot transform an empty last axis (shape #{inspect(shape)}); " <>
            "give a positive integer :length to pad it with zeros"
  end
end
