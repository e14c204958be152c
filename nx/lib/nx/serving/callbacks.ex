defmodule Nx.Serving.Callbacks do
  @moduledoc false
  # The calls of a serving module's callbacks (init/3, handle_batch/3 and the function it
  # returns), each checked for the shape of its answer, shared by the inline run and the
  # serving process.

  alias Nx.Serving.Telemetry

  def init!(module, type, arg, [_ | _] = partitions) do
    case module.init(type, arg, partitions) do
      {:ok, _state} = ok ->
        ok

      other ->
        raise "#{inspect(module)}.init/3 must return {:ok, state}. Got: #{inspect(other)}"
    end
  end

  def handle_batch!(module, batch, partition, state) do
    case module.handle_batch(batch, partition, state) do
      {:execute, function, _state} = execute when is_function(function, 0) ->
        execute

      other ->
        raise "#{inspect(module)}.handle_batch/3 must return {:execute, function, state}, " <>
                "where function is a function that receives no arguments and returns a tuple. " <>
                "Got: #{inspect(other)}"
    end
  end

  # runs the function handle_batch/3 returned, inside the span [:nx, :serving, :execute];
  # `before` runs first, inside the span, and `after_fun` gets the result before the span ends
  def execute!(module, function, before \\ fn -> :ok end, after_fun \\ fn _ -> :ok end) do
    Telemetry.span([:nx, :serving, :execute], %{module: module}, fn ->
      before.()

      case function.() do
        {output, metadata} = result ->
          after_fun.(result)
          {{output, metadata}, %{module: module, metadata: metadata}}

        other ->
          raise "the function returned by #{inspect(module)}.handle_batch/3 must return " <>
                  "{output, metadata}. Got: #{inspect(other)}"
      end
    end)
  end
end
