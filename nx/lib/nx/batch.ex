defmodule Nx.Batch do
  @moduledoc """
  Rows of tensors (or of containers of tensors) gathered to be computed on together, as
  Nx 0.7.2's `Nx.Batch`.

  A batch records its entries without building anything: the tensors are joined along a new
  first axis (`stack/2`) or their own first axis (`concatenate/2`), and zero rows appended
  (`pad/2`), only when the batch is given to `defn` or to a jitted or compiled function (it is
  an `Nx.LazyContainer`). `Nx.Serving` gathers the requests of its clients into batches.

  The fields `:size` (rows of data), `:pad` (zero rows after them), `:key` (the batch key,
  `key/2`) and `:template` (the template of one row) may be read.
  """

  @axis 0

  @enforce_keys [:key]
  @derive {Inspect, only: [:size, :pad]}
  # `stack` holds the entries, the latest first, each as `{leaf_funs, rows}`: one function of
  # no arguments per tensor of the template, in the template's order, that returns that
  # tensor with the entry's rows along the first axis
  defstruct [:key, stack: [], size: 0, template: nil, pad: 0]

  @type t :: %Nx.Batch{
          stack: list(),
          size: non_neg_integer(),
          template: Nx.Container.t() | Nx.Tensor.t() | nil,
          pad: non_neg_integer(),
          key: term()
        }

  @doc """
  An empty batch, of key `:default`.

      iex> Nx.Batch.new().size
      0
  """
  @spec new() :: t
  def new, do: %Nx.Batch{key: :default}

  @doc """
  Gives `batch` the key `key`: a serving started with `:batch_keys` gathers the batches of
  each key apart (see `Nx.Serving`).

      iex> Nx.Batch.new() |> Nx.Batch.key(:text) |> Map.fetch!(:key)
      :text
  """
  @spec key(t, term) :: t
  def key(%Nx.Batch{} = batch, key), do: %{batch | key: key}

  @doc """
  Sets the rows of zeros added after the data when the batch is computed on.

      iex> batch = Nx.Batch.concatenate([Nx.tensor([7, 8])]) |> Nx.Batch.pad(3)
      iex> Nx.Defn.jit_apply(&Function.identity/1, [batch])
      #Nx.Tensor<
        s64[5]
        [7, 8, 0, 0, 0]
      >
  """
  @spec pad(t, non_neg_integer) :: t
  def pad(%Nx.Batch{} = batch, pad) when is_integer(pad) and pad >= 0, do: %{batch | pad: pad}

  @doc """
  One batch of `left`'s rows followed by `right`'s; see `merge/1`.

      iex> left = Nx.Batch.stack([Nx.tensor(1.5), Nx.tensor(2.5)])
      iex> right = Nx.Batch.concatenate([Nx.tensor([3.5])])
      iex> batch = Nx.Batch.merge(left, right)
      iex> batch.size
      3
      iex> Nx.Defn.jit_apply(&Function.identity/1, [batch])
      #Nx.Tensor<
        f32[3]
        [1.5, 2.5, 3.5]
      >
  """
  @spec merge(t, t) :: t
  def merge(left, right), do: merge([left, right])

  @doc """
  One batch of the rows of `batches`, in order. Sizes and paddings add up (the zero rows
  all come at the end); every batch must have the first one's key and compatible rows.
  An empty list gives `new/0`.
  """
  @spec merge([t]) :: t
  def merge([]), do: new()

  def merge([%Nx.Batch{} = first | rest]) do
    Enum.reduce(rest, first, fn %Nx.Batch{} = next, acc ->
      if next.key != acc.key do
        raise ArgumentError,
              "cannot merge batches with different batch keys: " <>
                "#{inspect(acc.key)} and #{inspect(next.key)}"
      end

      if acc.template != nil and next.template != nil and
           not Nx.compatible?(acc.template, next.template) do
        raise ArgumentError,
              "cannot merge batches due to incompatible templates:\n\n    " <>
                "#{inspect(next.template)}\n\nand:\n\n    #{inspect(acc.template)}\n"
      end

      %{
        acc
        | template: acc.template || next.template,
          stack: next.stack ++ acc.stack,
          size: acc.size + next.size,
          pad: acc.pad + next.pad
      }
    end)
  end

  @doc """
  Splits `batch` into a batch of its first `n` rows at most and a batch of the rest.

  When `n` is less than the size, the first batch has no padding and the second keeps it all.
  Otherwise the first batch takes all the data and as much of the padding as fits in `n`
  rows; the second, with no data, keeps the padding left over.

      iex> batch = Nx.Batch.concatenate([Nx.tensor([1, 2, 3]), Nx.tensor([4])])
      iex> {first, rest} = Nx.Batch.split(batch, 2)
      iex> {first.size, rest.size}
      {2, 2}
      iex> Nx.Defn.jit_apply(&Function.identity/1, [rest])
      #Nx.Tensor<
        s64[2]
        [3, 4]
      >
  """
  @spec split(t, pos_integer) :: {t, t}
  def split(%Nx.Batch{} = batch, n) when is_integer(n) and n > 0 do
    %{template: template, pad: pad, size: size, key: key} = batch

    if n < size do
      {first, rest} = take_rows(Enum.reverse(batch.stack), n, [])

      {%{batch | stack: first, size: n, pad: 0},
       %Nx.Batch{key: key, template: template, stack: rest, size: size - n, pad: pad}}
    else
      first_pad = min(pad, n - size)

      {%{batch | pad: first_pad}, %Nx.Batch{key: key, template: template, pad: pad - first_pad}}
    end
  end

  # walks the entries oldest first, taking `n` rows; returns both parts as stacks (latest
  # first), an entry that straddles the cut being sliced in two
  defp take_rows([{_funs, rows} = entry | older_first], n, taken) when rows <= n do
    if rows == n,
      do: {[entry | taken], Enum.reverse(older_first)},
      else: take_rows(older_first, n - rows, [entry | taken])
  end

  defp take_rows([{funs, rows} | older_first], n, taken) do
    head = {Enum.map(funs, &slice_rows(&1, 0, n)), n}
    tail = {Enum.map(funs, &slice_rows(&1, n, rows - n)), rows - n}
    {[head | taken], Enum.reverse(older_first, [tail])}
  end

  defp slice_rows(fun, start, len), do: fn -> Nx.Batch.Rows.slice(fun.(), start, len) end

  @doc """
  Adds `entries` to `batch` (a new one when none is given), each joined along its own first
  axis: an entry counts as many rows as that axis is long. Every tensor of an entry must have
  that axis, of one length across the entry. See `stack/2` to add each entry as one row.

      iex> batch = Nx.Batch.concatenate([Nx.tensor([[1, 2]]), Nx.tensor([[3, 4], [5, 6]])])
      iex> batch.size
      3
      iex> Nx.Defn.jit_apply(&Function.identity/1, [batch])
      #Nx.Tensor<
        s64[3][2]
        [
          [1, 2],
          [3, 4],
          [5, 6]
        ]
      >

  Containers are joined tensor by tensor:

      iex> batch = Nx.Batch.concatenate([%{a: Nx.tensor([1]), b: Nx.tensor([10])}, %{a: Nx.tensor([2]), b: Nx.tensor([20])}])
      iex> %{a: a, b: b} = Nx.Defn.jit_apply(&Function.identity/1, [batch])
      iex> {Nx.to_flat_list(a), Nx.to_flat_list(b)}
      {[1, 2], [10, 20]}
  """
  @spec concatenate(t, [Nx.LazyContainer.t()]) :: t
  def concatenate(%Nx.Batch{} = batch \\ new(), entries) when is_list(entries),
    do: add_entries(batch, entries, :concatenate)

  @doc """
  Adds `entries` to `batch` (a new one when none is given), each entry one row: its tensors
  gain a first axis of length 1. See `concatenate/2` to add entries of several rows.

      iex> batch = Nx.Batch.stack([Nx.tensor([1, 2]), Nx.tensor([3, 4])])
      iex> batch = Nx.Batch.stack(batch, [Nx.tensor([5, 6])])
      iex> batch.size
      3
      iex> Nx.Defn.jit_apply(&Function.identity/1, [batch])
      #Nx.Tensor<
        s64[3][2]
        [
          [1, 2],
          [3, 4],
          [5, 6]
        ]
      >
  """
  @spec stack(t, [Nx.LazyContainer.t()]) :: t
  def stack(%Nx.Batch{} = batch \\ new(), entries) when is_list(entries),
    do: add_entries(batch, entries, :stack)

  defp add_entries(batch, [], _how), do: batch

  defp add_entries(batch, [first | _] = entries, how) do
    {first_template, _, _} = entry_leaves(first, how)

    if batch.template != nil and not Nx.compatible?(batch.template, first_template) do
      raise ArgumentError,
            "cannot add to batch due to incompatible tensors/containers.\n\n" <>
              "Each row of the batch has the template:\n\n#{inspect(batch.template)}\n\n" <>
              "but the first entry given has:\n\n#{inspect(first_template)}\n\n" <>
              "Entry: #{inspect(first)}\n"
    end

    Enum.reduce(entries, %{batch | template: first_template}, fn entry, acc ->
      {template, rows, funs} = entry_leaves(entry, how)

      unless Nx.compatible?(template, first_template) do
        raise ArgumentError,
              "cannot add to batch due to incompatible tensors/containers.\n\n" <>
                "The first entry given has the template:\n\n#{inspect(first_template)}\n\n" <>
                "but another one has:\n\n#{inspect(template)}\n\n" <>
                "Entry: #{inspect(entry)}\n"
      end

      %{acc | stack: [{funs, rows} | acc.stack], size: acc.size + rows}
    end)
  end

  # {template of one row, rows, leaf functions in the template's order}
  defp entry_leaves(entry, :stack) do
    {template, funs} =
      Nx.LazyContainer.traverse(entry, [], fn leaf, fun, funs ->
        {leaf, [fn -> Nx.Batch.Rows.with_row_axis(fun.()) end | funs]}
      end)

    {template, 1, Enum.reverse(funs)}
  end

  defp entry_leaves(entry, :concatenate) do
    {template, {rows, funs}} =
      Nx.LazyContainer.traverse(entry, {nil, []}, fn leaf, fun, {rows, funs} ->
        %Nx.Tensor{shape: shape, names: names} = leaf

        if shape == {} do
          raise ArgumentError, "cannot concatenate scalar tensor in #{inspect(entry)}"
        end

        leaf_rows = elem(shape, @axis)

        if rows != nil and rows != leaf_rows do
          raise ArgumentError,
                "concatenate expects all tensors in the same container to have the same value " <>
                  "for first axis, got #{leaf_rows} and #{rows} in #{inspect(entry)}"
        end

        row = %{leaf | shape: Tuple.delete_at(shape, @axis), names: tl(names)}
        {row, {leaf_rows, [fun | funs]}}
      end)

    if rows == nil do
      raise ArgumentError, "cannot have an empty container in concatenate: #{inspect(entry)}"
    end

    {template, rows, Enum.reverse(funs)}
  end
end

defimpl Nx.LazyContainer, for: Nx.Batch do
  # Each tensor of the row template becomes one of `size + pad` rows, built (when a compiled
  # function asks for it) by joining that tensor of every entry, oldest first, and appending
  # the zero rows.
  def traverse(%Nx.Batch{stack: []}, _acc, _fun) do
    raise ArgumentError, "cannot traverse/jit/compile Nx.Batch without entries"
  end

  def traverse(%Nx.Batch{stack: stack, template: template, size: size, pad: pad}, acc, fun) do
    rows = size + pad

    leaf_builders =
      stack
      |> Enum.reverse()
      |> Enum.map(fn {funs, _rows} -> funs end)
      |> Enum.zip_with(fn pieces -> fn -> build_leaf(pieces, pad) end end)

    {container, {acc, []}} =
      Nx.Defn.Composite.traverse(template, {acc, leaf_builders}, fn row, {acc, [build | rest]} ->
        leaf = %{row | shape: Tuple.insert_at(row.shape, 0, rows), names: [nil | row.names]}
        {leaf, acc} = fun.(leaf, build, acc)
        {leaf, {acc, rest}}
      end)

    {container, acc}
  end

  # (the first axis unnamed, as in the template given to the compiler)
  defp build_leaf(pieces, pad) do
    tensor = pieces |> Enum.map(& &1.()) |> Nx.Batch.Rows.join(pad)
    %{tensor | names: [nil | tl(tensor.names)]}
  end
end

defmodule Nx.Batch.Rows do
  @moduledoc false
  # The operations along the first axis (the rows) that batching makes on every request: a
  # row axis for a stacked entry, the rows of an entry or of an output, the entries joined and
  # padded. On tensors whose bytes are in Elixir memory (Nx.BinaryBackend, not vectorized)
  # they are operations on the row-major bytes, with no call of the runtime (which would
  # trace and compile one graph per offset and row count); other tensors (resident on a
  # device) go through Nx's own operations.

  alias Nx.Tensor, as: T

  def with_row_axis(%T{data: %Nx.BinaryBackend{}, vectorized_axes: []} = tensor),
    do: %{tensor | shape: Tuple.insert_at(tensor.shape, 0, 1), names: [nil | tensor.names]}

  def with_row_axis(tensor), do: Nx.new_axis(tensor, 0)

  # rows start..start + rows - 1
  def slice(%T{data: %Nx.BinaryBackend{state: bytes}, vectorized_axes: []} = tensor, start, rows)
      when elem(tensor.shape, 0) >= start + rows do
    size = row_bytes(tensor)

    %{
      tensor
      | data: %Nx.BinaryBackend{state: binary_part(bytes, start * size, rows * size)},
        shape: put_elem(tensor.shape, 0, rows)
    }
  end

  def slice(tensor, start, rows), do: Nx.slice_along_axis(tensor, start, rows, axis: 0)

  # the rows of `pieces` (tensors of one type and row shape), in order, then `pad` zero rows
  def join([%T{} = first | _] = pieces, pad) do
    if Enum.all?(pieces, &match?(%T{data: %Nx.BinaryBackend{}, vectorized_axes: []}, &1)) do
      size = row_bytes(first)
      rows = Enum.reduce(pieces, pad, &(elem(&1.shape, 0) + &2))
      bytes = Enum.map(pieces, & &1.data.state)
      bytes = if pad == 0, do: bytes, else: [bytes | :binary.copy(<<0>>, pad * size)]

      %{
        first
        | data: %Nx.BinaryBackend{state: IO.iodata_to_binary(bytes)},
          shape: put_elem(first.shape, 0, rows)
      }
    else
      joined =
        case pieces do
          [one] -> one
          many -> Nx.concatenate(many, axis: 0)
        end

      if pad == 0 do
        joined
      else
        zero = Nx.tensor(0, type: Nx.type(joined), backend: Nx.BinaryBackend)
        Nx.pad(joined, zero, [{0, pad, 0} | List.duplicate({0, 0, 0}, Nx.rank(joined) - 1)])
      end
    end
  end

  defp row_bytes(%T{type: type, shape: shape}) do
    shape
    |> Tuple.delete_at(0)
    |> Tuple.to_list()
    |> Enum.reduce(Nx.Type.byte_size(type), &(&1 * &2))
  end
end
