defmodule NxJax.RuntimeLayersTest do
  # The runtime's modules call one another one way (docs/ARCHITECTURE.md, "The runtime's
  # layers"): no two of NxJax.Worker, NxJax.Worker.*, NxJax.Wire, NxJax.Pool and NxJax.Devices
  # (which asks a running worker; a worker's placement at its start is NxJax.Worker.Placement)
  # call each other, directly or around a circle. The calls are read from the compiled beams (each module's
  # imports: every remote call and external fun it makes), as tests/test_module_layers.py reads
  # py_backend's imports.
  use ExUnit.Case, async: true

  defp runtime_module?(module) do
    name = Atom.to_string(module)

    name in [
      "Elixir.NxJax.Worker",
      "Elixir.NxJax.Wire",
      "Elixir.NxJax.Pool",
      "Elixir.NxJax.Devices"
    ] or
      String.starts_with?(name, "Elixir.NxJax.Worker.")
  end

  defp runtime_modules do
    {:ok, modules} = :application.get_key(:nx_jax, :modules)
    Enum.filter(modules, &runtime_module?/1)
  end

  # module => the runtime modules it calls (itself left out)
  defp calls(modules) do
    Map.new(modules, fn module ->
      {:ok, {^module, [imports: imports]}} = :beam_lib.chunks(beam(module), [:imports])

      called =
        for {m, _f, _a} <- imports, m != module, runtime_module?(m), into: MapSet.new(), do: m

      {module, called}
    end)
  end

  defp beam(module), do: module |> :code.which() |> to_charlist()

  # one circle per strongly connected set of more than one module, as a path back to its start
  defp circles(graph) do
    graph
    |> Map.keys()
    |> Enum.sort()
    |> Enum.flat_map(fn start ->
      case path_back(graph, start, start, [start], MapSet.new()) do
        nil -> []
        path -> [path]
      end
    end)
    |> Enum.uniq_by(&MapSet.new/1)
  end

  defp path_back(graph, start, at, path, seen) do
    Enum.find_value(Enum.sort(Map.get(graph, at, [])), fn next ->
      cond do
        next == start -> Enum.reverse([start | path])
        MapSet.member?(seen, next) -> nil
        true -> path_back(graph, start, next, [next | path], MapSet.put(seen, next))
      end
    end)
  end

  test "no two runtime modules call each other, directly or around a circle" do
    modules = runtime_modules()
    # (the layers this test is about are all there)
    for m <- [
          NxJax.Worker,
          NxJax.Worker.Caller,
          NxJax.Worker.Server,
          NxJax.Worker.Lease,
          NxJax.Worker.LentPort,
          NxJax.Worker.Config,
          NxJax.Worker.Placement,
          NxJax.Wire,
          NxJax.Pool,
          NxJax.Devices
        ],
        do: assert(m in modules)

    graph = calls(modules)
    assert circles(graph) == [], "circles among the runtime's modules: #{inspect(circles(graph))}"
  end

  test "the reading of calls finds a circle where there is one" do
    graph = %{a: MapSet.new([:b]), b: MapSet.new([:c]), c: MapSet.new([:a]), d: MapSet.new([:a])}
    assert circles(graph) == [[:a, :b, :c, :a]]
    assert circles(%{a: MapSet.new([:b]), b: MapSet.new()}) == []
    # and the beams' imports hold the calls the source makes
    assert NxJax.Worker.Caller in calls([NxJax.Worker])[NxJax.Worker]
    assert NxJax.Worker.Lease in calls([NxJax.Worker.Server])[NxJax.Worker.Server]
  end

  test "the lower layers call no upper one" do
    graph = calls(runtime_modules())
    # the lease, the order of log lines and the wire call no runtime module; the worker's
    # settings only its sources and its placement, which calls only the sources
    assert graph[NxJax.Worker.Lease] == MapSet.new()
    assert graph[NxJax.Worker.LogOrder] == MapSet.new()
    assert graph[NxJax.Wire] == MapSet.new()

    assert graph[NxJax.Worker.Config] ==
             MapSet.new([NxJax.Worker.Sources, NxJax.Worker.Placement])

    assert graph[NxJax.Worker.Placement] == MapSet.new([NxJax.Worker.Sources])

    for lower <- Map.keys(graph) -- [NxJax.Devices, NxJax.Pool, NxJax.Worker] do
      refute NxJax.Worker in graph[lower], "#{inspect(lower)} calls up into NxJax.Worker"
      refute NxJax.Pool in graph[lower], "#{inspect(lower)} calls up into NxJax.Pool"
    end
  end
end
