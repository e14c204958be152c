defmodule Nx.Serving.Telemetry do
  @moduledoc false
  # Spans of Nx.Serving through :telemetry where that library is loaded; the clean room does
  # not depend on it. (Loaded, not merely available: a handler can only have been attached
  # through a loaded :telemetry, and the check is one BIF call, where Code.ensure_loaded?/1
  # would search the code path on every request of a node without it.)

  @compile {:no_warn_undefined, :telemetry}

  @spec span([atom], map, (() -> {result, map})) :: result when result: term
  def span(event, metadata, fun) do
    if :erlang.function_exported(:telemetry, :span, 3) do
      :telemetry.span(event, metadata, fun)
    else
      fun.() |> elem(0)
    end
  end
end
