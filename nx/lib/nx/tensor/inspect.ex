defimpl Inspect, for: Nx.Tensor do
  @moduledoc """
  Prints tensors as Nx does:

      #Nx.Tensor<
        f32[2][2]
        [
          [1.0, 2.0],
          [3.0, 4.0]
        ]
      >

  Floats are printed as Nx 0.7.2 prints them: the shortest decimal of the element's value
  as a double, so an f32 that stores 3.0485873 prints `3.0485873222351074` and one that
  stores 0.1 prints `0.10000000149011612`; non-finite values print as `NaN`, `Inf` and
  `-Inf`; complex elements as `1.0+2.0i`. At most `limit` elements are printed, then `...`.
  Tensors whose data is an expression delegate their body to `data.__struct__.inspect/2`.
  """

  alias Nx.BinaryBackend

  def inspect(%Nx.Tensor{data: data, type: type, shape: shape} = tensor, opts) do
    dims =
      Enum.zip_with(
        Tuple.to_list(shape),
        tensor.names ++ List.duplicate(nil, tuple_size(shape)),
        fn
          dim, nil -> "[#{dim}]"
          dim, name -> "[#{name}: #{dim}]"
        end
      )

    header = Nx.Type.to_string(type) <> Enum.join(dims)

    # vectorized tensors print their vectorized axes first, then every entry (Nx 0.7)
    header =
      case tensor.vectorized_axes do
        [] ->
          header

        axes ->
          "vectorized" <> Enum.map_join(axes, fn {n, s} -> "[#{n}: #{s}]" end) <> "\n" <> header
      end

    body =
      case data do
        %BinaryBackend{state: binary} ->
          format_data(binary, type, Nx.full_shape(tensor), opts.limit)

        nil ->
          "Nx.TemplateBackend"

        %module{} ->
          module.inspect(tensor, opts)
      end

    # An algebra document rather than a string: inside a list, tuple or map the tensor's
    # lines are indented with the container's items, as Nx prints them.
    lines =
      "#{header}\n#{body}"
      |> String.split("\n")
      |> Enum.map(fn
        "" -> Inspect.Algebra.nest(Inspect.Algebra.line(), :reset)
        line -> Inspect.Algebra.concat(Inspect.Algebra.line(), line)
      end)

    Inspect.Algebra.force_unfit(
      Inspect.Algebra.concat([
        "#Nx.Tensor<",
        Inspect.Algebra.nest(Inspect.Algebra.concat(lines), 2),
        Inspect.Algebra.line(),
        ">"
      ])
    )
  end

  defp indent(string) do
    string
    |> String.split("\n")
    |> Enum.map_join("\n", fn
      "" -> ""
      line -> "  " <> line
    end)
  end

  defp format_data(binary, type, shape, limit) do
    size = Nx.Shape.size(shape)
    budget = if limit == :infinity, do: size, else: limit
    # Only the elements that can be printed are decoded.
    bytes = Nx.Type.byte_size(type)
    visible = binary_part(binary, 0, min(budget + 1, size) * bytes)
    elements = visible |> BinaryBackend.to_list(type) |> Enum.map(&format_number(&1, type))

    case Tuple.to_list(shape) do
      [] ->
        hd(elements)

      dims ->
        {string, _elements, _budget} = render(dims, elements, budget)
        string
    end
  end

  defp render([dim], elements, budget) do
    count = min(dim, budget)
    {shown, rest} = Enum.split(elements, count)
    shown = if count < dim, do: shown ++ ["..."], else: shown
    {"[" <> Enum.join(shown, ", ") <> "]", rest, budget - count}
  end

  defp render([dim | inner], elements, budget) do
    {children, elements, budget} = render_children(dim, inner, elements, budget, [])

    case children do
      [] -> {"[]", elements, budget}
      _ -> {"[\n" <> Enum.map_join(children, ",\n", &indent/1) <> "\n]", elements, budget}
    end
  end

  defp render_children(0, _inner, elements, budget, acc),
    do: {Enum.reverse(acc), elements, budget}

  defp render_children(_left, _inner, elements, 0, acc),
    do: {Enum.reverse(["..." | acc]), elements, 0}

  defp render_children(left, inner, elements, budget, acc) do
    {child, elements, budget} = render(inner, elements, budget)
    render_children(left - 1, inner, elements, budget, [child | acc])
  end

  @doc false
  def format_number(:nan, _type), do: "NaN"
  def format_number(:infinity, _type), do: "Inf"
  def format_number(:neg_infinity, _type), do: "-Inf"
  def format_number(int, _type) when is_integer(int), do: Integer.to_string(int)

  # As Nx 0.7.2: every float prints as the shortest decimal of its double (an f32's stored
  # value widened), so an f32 holding 0.1 prints 0.10000000149011612; complex elements
  # print as `re+imi` the same way.
  def format_number(%Complex{} = z, _type), do: Complex.to_string(z)
  def format_number(float, _type) when is_float(float), do: Float.to_string(float)
end
