defmodule Nx.Heatmap do
  @moduledoc """
  A tensor that `inspect` draws as a heatmap (made by `Nx.to_heatmap/2`).

  Each value becomes a cell: on a terminal with ANSI colours, a background of the 24-step grey
  ramp of the 256-colour palette (232, black, for the smallest value, to 255, white, for the
  largest); without them, a digit from 0 to 9. The last two axes are drawn as rows and
  columns, each such slice scaled on its own smallest and largest finite values (a vector as
  one row); the axes before them nest the slices in brackets, as a tensor's lists are
  printed. Non-finite values are marked: `+` and `-` for the infinities and `x` for NaN
  without colours; a white or black `∞` and a red cell with them.

  It can be indexed as its tensor is (`heatmap[0]`): a slice keeps the options as a heatmap,
  a single element is returned as a tensor.
  """

  @doc false
  defstruct [:tensor, opts: []]

  @type t :: %__MODULE__{tensor: Nx.Tensor.t(), opts: keyword}

  @behaviour Access

  @impl Access
  def fetch(%__MODULE__{tensor: tensor} = heatmap, index) do
    case Access.fetch(tensor, index) do
      {:ok, %Nx.Tensor{shape: {}} = element} -> {:ok, element}
      {:ok, slice} -> {:ok, %{heatmap | tensor: slice}}
      :error -> :error
    end
  end

  @impl Access
  def get_and_update(%__MODULE__{tensor: tensor} = heatmap, index, fun) do
    {value, tensor} = Access.get_and_update(tensor, index, fun)
    {value, %{heatmap | tensor: tensor}}
  end

  @impl Access
  def pop(%__MODULE__{tensor: tensor} = heatmap, index) do
    {value, tensor} = Access.pop(tensor, index)
    {value, %{heatmap | tensor: tensor}}
  end
end

defimpl Inspect, for: Nx.Heatmap do
  import Inspect.Algebra

  # the grey ramp of the 256-colour palette, darkest first
  @darkest 232
  @lightest 255

  def inspect(%Nx.Heatmap{tensor: tensor, opts: heatmap_opts}, opts) do
    brackets = {color("[", :list, opts), color(",", :list, opts), color("]", :list, opts)}

    vectorized =
      case tensor.vectorized_axes do
        [] ->
          empty()

        axes ->
          {names, sizes} = Enum.unzip(axes)
          concat(["vectorized", axes_doc(sizes, names, brackets), line()])
      end

    header =
      concat([
        vectorized,
        color(Nx.Type.to_string(tensor.type), :atom, opts),
        axes_doc(Tuple.to_list(tensor.shape), tensor.names, brackets)
      ])

    body = body(Nx.devectorize(tensor), painter(heatmap_opts), opts.limit, brackets)

    concat([
      color("#Nx.Heatmap<", :map, opts),
      nest(concat([line(), header, line(), body]), 2),
      color("\n>", :map, opts)
    ])
  end

  # `[2][name: 3]`
  defp axes_doc(sizes, names, {open, _sep, close}) do
    sizes
    |> Enum.zip(names)
    |> Enum.map(fn
      {size, nil} -> concat([open, Integer.to_string(size), close])
      {size, name} -> concat([open, "#{name}: #{size}", close])
    end)
    |> concat()
  end

  # How cells are drawn: {cell for a share of the slice's range (0.0 to 1.0), cell for a
  # non-finite value, end of a row}
  defp painter(heatmap_opts) do
    if Keyword.get_lazy(heatmap_opts, :ansi_enabled, &IO.ANSI.enabled?/0) do
      blank = Keyword.get(heatmap_opts, :ansi_whitespace, "\u3000")
      steps = @lightest - @darkest

      {fn share -> [IO.ANSI.color_background(@darkest + round(share * steps)), blank] end,
       fn
         :infinity -> [IO.ANSI.color_background(@lightest), "∞"]
         :neg_infinity -> [IO.ANSI.color_background(@darkest), "∞"]
         :nan -> [IO.ANSI.red_background(), blank]
       end, IO.ANSI.reset()}
    else
      {fn share -> Integer.to_string(round(share * 9)) end,
       fn
         :infinity -> "+"
         :neg_infinity -> "-"
         :nan -> "x"
       end, []}
    end
  end

  # A vector is one row, whatever the limit.
  defp body(%Nx.Tensor{shape: {_size}} = tensor, painter, _limit, _brackets),
    do: row(Nx.to_flat_list(tensor), painter)

  # Otherwise slices of the last two axes, in brackets for each axis before them. `limit`
  # counts the slices drawn (Inspect's limit); past it, `...`. A matrix is drawn whole.
  defp body(tensor, painter, limit, brackets) do
    {outer, [rows, cols]} = tensor.shape |> Tuple.to_list() |> Enum.split(-2)
    slices = Enum.product(outer)

    wanted =
      cond do
        outer == [] -> 1
        limit == :infinity -> slices
        true -> min(slices, limit)
      end

    values =
      cond do
        wanted == 0 -> []
        wanted == slices -> Nx.to_flat_list(tensor)
        true -> Nx.to_flat_list(tensor, limit: wanted * rows * cols)
      end

    slice = fn values -> slice(values, rows, cols, painter) end
    {doc, _rest, _left} = nested(outer, values, limit, slice, brackets)
    doc
  end

  # {document, values left, slices still allowed}
  defp nested([], values, left, slice, _brackets) do
    {doc, rest} = slice.(values)
    {doc, rest, if(left == :infinity, do: left, else: left - 1)}
  end

  defp nested([size | inner], values, left, slice, {open, sep, _close} = brackets) do
    {items, rest, left} = items(size, inner, values, left, slice, brackets, [])
    # the innermost brackets hold slices, which begin on a line of their own
    first = if inner == [], do: open, else: concat(open, line())
    {_open, _sep, close} = brackets

    doc =
      [first | Enum.intersperse(items, concat(sep, line()))]
      |> concat()
      |> nest(2)
      |> concat(line())
      |> concat(close)

    {doc, rest, left}
  end

  defp items(0, _inner, values, left, _slice, _brackets, acc),
    do: {Enum.reverse(acc), values, left}

  defp items(_size, _inner, values, 0, _slice, _brackets, acc),
    do: {Enum.reverse(["..." | acc]), values, 0}

  defp items(size, inner, values, left, slice, brackets, acc) do
    {doc, values, left} = nested(inner, values, left, slice, brackets)
    items(size - 1, inner, values, left, slice, brackets, [doc | acc])
  end

  # rows x cols values drawn as rows, each on a new line, on the slice's own range
  defp slice(values, rows, cols, painter) do
    {mine, rest} = Enum.split(values, rows * cols)
    range = range(mine)

    doc =
      mine
      |> Enum.chunk_every(cols)
      |> Enum.map(&concat(line(), row(&1, painter, range)))
      |> concat()

    {doc, rest}
  end

  defp row(values, painter), do: row(values, painter, range(values))

  defp row(values, {cell, non_finite, ending}, {low, span}) do
    cells =
      Enum.map(values, fn
        value when is_number(value) -> cell.((value - low) / span)
        atom -> non_finite.(atom)
      end)

    IO.iodata_to_binary([cells | ending])
  end

  # the smallest finite value and the width of the range (1 when all are equal)
  defp range(values) do
    case for value <- values, is_number(value), do: value do
      [] ->
        {0, 1}

      finite ->
        {low, high} = Enum.min_max(finite)
        {low, if(high == low, do: 1, else: high - low)}
    end
  end
end
