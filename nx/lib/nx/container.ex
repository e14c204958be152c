defprotocol Nx.Container do
  @moduledoc """
  How `defn` walks a data structure: its arguments, its results, the state of a `while` and
  the branches of an `if`/`cond`.

  Tuples and maps (values in the order of their sorted keys) hold other containers; tensors
  and numbers (integers, floats, `Complex`) are the leaves. A struct takes part by deriving
  the protocol and naming the fields that hold tensors or containers:

      defmodule Params do
        @derive {Nx.Container, containers: [:weights, :bias], keep: [:activation]}
        defstruct [:weights, :bias, activation: :relu, cache: %{}]
      end

  A walk visits the `:containers` fields in the order given. The `:keep` fields are carried
  through unchanged (their values are part of what a compiled function is cached on, so keep
  only values known when `defn` is traced); every other field gets its default back, so
  values such as caches never reach the traced code.

  The walks are not recursive by themselves: `fun` gets each field or element as it is and
  decides whether to walk further (`Nx.Defn.Composite` does).
  """

  @doc """
  Replaces each element of `data` with the first element of `fun.(element, acc)`, threading
  `acc` through them in order; returns `{new_data, acc}`.
  """
  @spec traverse(t(), acc, (t(), acc -> {t(), acc})) :: {t(), acc} when acc: term()
  def traverse(data, acc, fun)

  @doc """
  Folds `fun.(element, acc)` over the elements of `data`, in the order of `traverse/3`.
  """
  @spec reduce(t(), acc, (t(), acc -> acc)) :: acc when acc: term()
  def reduce(data, acc, fun)

  @doc """
  Describes `data` for serialization: `{module, [{key, element}], extra}`; `module`'s
  `deserialize(pairs, extra)` rebuilds it from the pairs once their elements are rebuilt.
  """
  @spec serialize(t()) :: {module(), [{term(), t()}], term()}
  def serialize(data)
end

defimpl Nx.Container, for: Tuple do
  def traverse(tuple, acc, fun) do
    {elements, acc} = tuple |> Tuple.to_list() |> Enum.map_reduce(acc, fun)
    {List.to_tuple(elements), acc}
  end

  def reduce(tuple, acc, fun), do: tuple |> Tuple.to_list() |> Enum.reduce(acc, fun)

  def serialize(tuple), do: {__MODULE__, Enum.map(Tuple.to_list(tuple), &{[], &1}), :ok}

  def deserialize(pairs, :ok), do: pairs |> Enum.map(&elem(&1, 1)) |> List.to_tuple()
end

defimpl Nx.Container, for: Map do
  def traverse(map, acc, fun) do
    {pairs, acc} =
      map
      |> Enum.sort()
      |> Enum.map_reduce(acc, fn {key, value}, acc ->
        {value, acc} = fun.(value, acc)
        {{key, value}, acc}
      end)

    {Map.new(pairs), acc}
  end

  def reduce(map, acc, fun) do
    map |> Enum.sort() |> Enum.reduce(acc, fn {_key, value}, acc -> fun.(value, acc) end)
  end

  def serialize(map), do: {__MODULE__, Map.to_list(map), :ok}

  def deserialize(pairs, :ok), do: Map.new(pairs)
end

defimpl Nx.Container, for: [Integer, Float, Complex, Nx.Tensor] do
  def traverse(leaf, acc, fun), do: fun.(leaf, acc)
  def reduce(leaf, acc, fun), do: fun.(leaf, acc)

  def serialize(leaf) do
    raise ArgumentError, "a tensor or a number is serialized as a leaf, got: #{inspect(leaf)}"
  end
end

defimpl Nx.Container, for: Any do
  # `@derive {Nx.Container, containers: [...], keep: [...]}`: one clause per function that
  # binds the named fields and rebuilds the struct from its defaults
  defmacro __deriving__(module, struct, options) do
    containers = Keyword.fetch!(options, :containers)
    keep = Keyword.get(options, :keep, [])

    for field <- containers ++ keep, not Map.has_key?(struct, field) do
      raise ArgumentError,
            "@derive Nx.Container names the field #{inspect(field)}, which " <>
              "#{inspect(module)} does not define"
    end

    var = &Macro.var(&1, __MODULE__)
    bind = fn fields -> Enum.map(fields, &{&1, var.(&1)}) end
    defaults = struct |> Map.drop(containers ++ keep) |> Map.to_list() |> Macro.escape()

    steps =
      for field <- containers do
        quote do: {unquote(var.(field)), acc} = fun.(unquote(var.(field)), acc)
      end

    folds =
      for field <- containers do
        quote do: acc = fun.(unquote(var.(field)), acc)
      end

    quote do
      defimpl Nx.Container, for: unquote(module) do
        def traverse(%{unquote_splicing(bind.(containers ++ keep))}, acc, fun) do
          unquote_splicing(steps)
          {%{unquote_splicing(defaults ++ bind.(containers ++ keep))}, acc}
        end

        def reduce(%{unquote_splicing(bind.(containers))}, acc, fun) do
          unquote_splicing(folds)
          acc
        end

        def serialize(%{unquote_splicing(bind.(containers ++ keep))}) do
          {__MODULE__, unquote(bind.(containers)), unquote(bind.(keep))}
        end

        def deserialize(pairs, kept), do: struct!(unquote(module), pairs ++ kept)
      end
    end
  end

  def traverse(data, _acc, _fun), do: undefined!(data)
  def reduce(data, _acc, _fun), do: undefined!(data)
  def serialize(data), do: undefined!(data)

  defp undefined!(data) do
    raise Protocol.UndefinedError,
      protocol: Nx.Container,
      value: data,
      description:
        "a struct takes part in defn by deriving Nx.Container " <>
          "(@derive {Nx.Container, containers: [...]})"
  end
end
