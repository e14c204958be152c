defmodule Nx.Tensor do
  @moduledoc """
  The tensor struct.

  `data` is `%Nx.BinaryBackend{}` for a concrete tensor (row-major, native-endian bytes) or
  `%Nx.Defn.Expr{}` for a tensor that stands for a node of an expression being traced inside
  `defn`. `type` is an Nx type such as `{:f, 32}`; `shape` a tuple of dimensions; `names` one
  entry per dimension, the axis's name or `nil` (see `Nx.names/1`); `vectorized_axes` the
  vectorized axes as a keyword list `name => size`, outermost first (see `Nx.vectorize/2`):
  `shape` excludes them, the data holds them as leading axes.

  Two concrete tensors with the same type, shape, axis names and data are `==`.

  ## Access (`tensor[index]`)

  `tensor[index]` reads a part of a tensor, eagerly and inside `defn`, where `index` is, for
  the first axis:

    * an integer (negative counts from the end): that position, the axis removed;
    * a range `first..last//step` (negative ends count from the end, `..` is the whole axis,
      `step` positive): those positions, the axis kept;
    * a scalar integer tensor: that position, the axis removed; a tensor index is dynamic (it
      may be a `defn` argument) and, as every dynamic start of `Nx.slice/4`, clamped into
      bounds;

  or a list of those, one per leading axis (`tensor[[0, 1..2]]`, `tensor[[.., 1]]`), or a
  keyword list of axis names and indices (`tensor[y: 1]`; the axes not named are whole). Each
  `tensor[index]` is one `Nx.slice/4`, then one `Nx.squeeze/2` of the axes indexed by a
  number. Integers and ranges out of bounds raise. Writing (`put_in/3`, `update_in/3`,
  `pop_in/2`) is not supported: use `Nx.put_slice/3` or `Nx.indexed_put/3`.

      iex> t = Nx.tensor([[1, 2, 3], [4, 5, 6]])
      iex> t[1]
      #Nx.Tensor<
        s64[3]
        [4, 5, 6]
      >
      iex> t[[.., -1]]
      #Nx.Tensor<
        s64[2]
        [3, 6]
      >
      iex> t[[0, 0..2//2]]
      #Nx.Tensor<
        s64[2]
        [1, 3]
      >
      iex> Nx.rename(t, [:x, :y])[y: 1]
      #Nx.Tensor<
        s64[x: 2]
        [2, 5]
      >
  """
  @enforce_keys [:type, :shape]
  defstruct [:data, :type, :shape, names: [], vectorized_axes: []]

  @type type :: {:u | :s | :f | :bf, pos_integer}
  @type t :: %__MODULE__{
          data: term,
          type: type,
          shape: tuple,
          names: [atom | nil],
          vectorized_axes: [{atom, pos_integer}]
        }

  @behaviour Access

  @impl Access
  def fetch(%__MODULE__{shape: {}} = tensor, index) do
    raise ArgumentError,
          "cannot use tensor[index] on a scalar tensor (index #{inspect(index)}, " <>
            "tensor type #{Nx.Type.to_string(tensor.type)})"
  end

  # an empty list reads the whole tensor (Nx 0.7.2)
  def fetch(%__MODULE__{} = tensor, []), do: {:ok, tensor}

  # a tensor of indices that is not a scalar, alone: those positions along the first axis
  # (Nx.take/2), as in Nx 0.7.2; in a list of indices each tensor must be a scalar
  def fetch(%__MODULE__{} = tensor, %__MODULE__{shape: shape} = indices) when shape != {},
    do: {:ok, Nx.take(tensor, indices)}

  def fetch(%__MODULE__{} = tensor, [{name, _} | _] = index) when is_atom(name) do
    # by axis name: the named axes indexed, the others whole
    names = Nx.names(tensor)
    by_axis = for {name, i} <- index, do: {Nx.Shape.normalize_axis(tensor.shape, name, names), i}
    {:ok, read(tensor, by_axis)}
  end

  def fetch(%__MODULE__{} = tensor, indices) when is_list(indices) do
    {:ok, read(tensor, Enum.with_index(indices, &{&2, &1}))}
  end

  def fetch(%__MODULE__{} = tensor, index), do: fetch(tensor, [index])

  @impl Access
  def get_and_update(%__MODULE__{}, index, _fun) do
    raise ArgumentError,
          "writing tensor[#{inspect(index)}] (put_in/update_in/get_and_update_in) is not " <>
            "supported: tensors are immutable; use Nx.put_slice/3 or Nx.indexed_put/3"
  end

  @impl Access
  def pop(%__MODULE__{}, index) do
    raise ArgumentError,
          "pop_in/pop on tensor[#{inspect(index)}] is not supported: use Nx.slice/4 and " <>
            "Nx.concatenate/2"
  end

  # One slice over every axis (the unindexed ones whole), then one squeeze of the axes an
  # integer or a tensor indexed: one graph when eager, the starts its arguments (so t[0] and
  # t[1] share one trace; integer starts are in bounds, so a dynamic start reads the same).
  # `by_axis` holds {axis, index} pairs; an axis given twice or past the rank raises.
  defp read(tensor, by_axis) do
    if Enum.any?(by_axis, fn {_axis, index} -> vectorized_index?(index) end),
      do: read_vectorized(tensor, by_axis),
      else: read_static(tensor, by_axis)
  end

  defp vectorized_index?(index),
    do:
      match?(
        %__MODULE__{shape: {}, vectorized_axes: [_ | _], type: {kind, _}} when kind in [:s, :u],
        index
      )

  # a vectorized scalar index (one position per entry): its axis is read whole, then the
  # entry's position taken there (Nx.take/3 with a scalar index drops the axis), lowest axis
  # first, so the indices' vectorized axes come in their order
  defp read_vectorized(tensor, by_axis) do
    Enum.reduce(by_axis, %{}, &put_axis!(&1, &2, tensor.shape))
    {picks, plain} = Enum.split_with(by_axis, fn {_axis, index} -> vectorized_index?(index) end)
    dropped = for {axis, index} <- plain, not match?(%Range{}, index), do: axis

    picks
    |> Enum.sort()
    |> Enum.with_index()
    |> Enum.reduce(read_static(tensor, plain), fn {{axis, index}, taken}, acc ->
      Nx.take(acc, index, axis: axis - Enum.count(dropped, &(&1 < axis)) - taken)
    end)
  end

  defp read_static(tensor, by_axis) do
    shape = tensor.shape
    by_axis = Enum.reduce(by_axis, %{}, &put_axis!(&1, &2, shape))

    parts =
      for {dim, axis} <- Enum.with_index(Tuple.to_list(shape)) do
        case by_axis do
          %{^axis => index} -> axis_part(index, dim, axis, shape)
          %{} -> {{0, dim, 1}, false}
        end
      end

    {slices, drops} = Enum.unzip(parts)
    starts = Enum.map(slices, &elem(&1, 0))
    lengths = Enum.map(slices, &elem(&1, 1))
    strides = Enum.map(slices, &elem(&1, 2))
    squeezed = for {true, axis} <- Enum.with_index(drops), do: axis

    read = fn t, starts ->
      sliced = Nx.slice(t, Tuple.to_list(starts), lengths, strides: strides)
      if squeezed == [], do: sliced, else: Nx.squeeze(sliced, axes: squeezed)
    end

    Nx.Defn.Compiler.jit_apply(read, [tensor, List.to_tuple(starts)], [])
  end

  defp put_axis!({axis, index}, acc, shape) do
    if axis >= tuple_size(shape) or Map.has_key?(acc, axis) do
      raise ArgumentError,
            "unknown or duplicate axis #{axis} found when slicing shape #{inspect(shape)}"
    end

    Map.put(acc, axis, index)
  end

  # {{start, length, stride}, remove the axis?} for the index of one axis of size `dim`.
  defp axis_part(index, dim, axis, shape) when is_integer(index) do
    {{position!(index, dim, axis, shape), 1, 1}, true}
  end

  defp axis_part(%Range{first: first, last: last, step: step} = range, dim, axis, shape) do
    # Nx 0.7.2's checks, in its order: the step, each end's bounds, then emptiness (Elixir
    # gives `3..1` and `1..-1` the step -1, hence the hint)
    if step < 0 do
      hint = if step == -1, do: ". Did you mean to pass the range #{first}..#{last}//1 instead?"
      raise ArgumentError, "range step must be positive, got range: #{inspect(range)}#{hint}"
    end

    from = position!(first, dim, axis, shape)
    to = position!(last, dim, axis, shape)

    if from > to do
      raise ArgumentError,
            "slicing a tensor requires a non-empty range, got: #{inspect(from..to//step)}"
    end

    {{from, to - from + 1, step}, false}
  end

  defp axis_part(%__MODULE__{} = index, _dim, axis, _shape) do
    cond do
      index.shape != {} or index.vectorized_axes != [] ->
        raise ArgumentError,
              "tensor must be a scalar when accessing a list/keyword of dimensions, got: " <>
                inspect(index)

      elem(index.type, 0) not in [:s, :u] ->
        raise ArgumentError,
              "a tensor index must have an integer type, got #{Nx.Type.to_string(index.type)} " <>
                "for axis #{axis}"

      true ->
        {{index, 1, 1}, true}
    end
  end

  defp axis_part(index, _dim, axis, shape) do
    raise ArgumentError,
          "tensor[index] takes integers, ranges and scalar integer tensors, got " <>
            "#{inspect(index)} for axis #{axis} of a tensor of shape #{inspect(shape)}"
  end

  # a position on an axis of size `dim`, negative ones counting from the end
  defp position!(index, dim, axis, shape) do
    at = if index < 0, do: index + dim, else: index

    if at < 0 or at >= dim do
      raise ArgumentError,
            "index #{index} is out of bounds for axis #{axis} in shape #{inspect(shape)}"
    end

    at
  end
end
