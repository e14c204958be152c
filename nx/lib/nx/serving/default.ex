defmodule Nx.Serving.Default do
  @moduledoc false
  # The serving module of Nx.Serving.new/2: the function given makes, for each partition
  # (and each batch key, for a function of two arguments), the function of one batch.
  @behaviour Nx.Serving

  @impl true
  def init(_type, make, partitions) do
    functions =
      partitions
      |> Enum.with_index(fn defn_options, partition ->
        {partition, batch_functions(make, defn_options)}
      end)
      |> Map.new()

    {:ok, functions}
  end

  defp batch_functions(make, defn_options) when is_function(make, 1),
    do: check!(make.(defn_options))

  defp batch_functions(make, defn_options) when is_function(make, 2) do
    {batch_keys, defn_options} = Keyword.pop!(defn_options, :batch_keys)
    Map.new(batch_keys, fn key -> {key, check!(make.(key, defn_options))} end)
  end

  defp check!(function) when is_function(function, 1), do: function

  defp check!(other) do
    raise "anonymous function given to Nx.Serving.new/2 should return an AOT or " <>
            "JIT compiled function that expects one argument. Got: #{inspect(other)}"
  end

  @impl true
  def handle_batch(batch, partition, functions) do
    function =
      case Map.fetch!(functions, partition) do
        by_key when is_map(by_key) -> Map.fetch!(by_key, batch.key)
        function -> function
      end

    {:execute, fn -> {function.(batch), :server_info} end, functions}
  end
end
