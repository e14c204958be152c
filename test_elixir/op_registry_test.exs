defmodule NxJax.OpRegistryTest do
  # The op registries of both languages and PROTOCOL.md's op tables list the same ops; the
  # Elixir side's and the worker's agree on each op's family, number of inputs and options.
  use ExUnit.Case, async: true

  doctest NxJax.Ops

  @root Path.expand("..", __DIR__)

  # family -> op -> {min inputs, max inputs or nil, sorted option names}, from the worker's
  # registry (py_backend/registry.py), one tab-separated line per op
  defp python_listing do
    script = """
    from py_backend import registry
    for family, entries in registry.listing().items():
        for name, (lo, hi, opts) in entries.items():
            print(family, name, lo, "" if hi is None else hi, ",".join(opts), sep="\\t")
    """

    {out, 0} =
      System.cmd(NxJax.Worker.python_executable(), ["-c", script],
        cd: @root,
        stderr_to_stdout: true
      )

    for line <- String.split(out, "\n", trim: true) do
      [family, name, lo, hi, opts] = String.split(line, "\t")

      {String.to_atom(family), String.to_atom(name),
       {String.to_integer(lo), if(hi == "", do: nil, else: String.to_integer(hi)),
        opts |> String.split(",", trim: true) |> Enum.map(&String.to_atom/1)}}
    end
  end

  defp elixir_listing do
    for {family, names} <- NxJax.Ops.families(), name <- names do
      {:ok, %{family: ^family, arity: arity, opts: opts}} = NxJax.Ops.fetch(name)
      {lo, hi} = if is_integer(arity), do: {arity, arity}, else: {elem(arity, 0), nil}
      {family, name, {lo, hi, Enum.sort(opts)}}
    end
  end

  # every op named in the first column of a table of PROTOCOL.md section 4
  defp protocol_ops do
    [_, section] =
      String.split(File.read!(Path.join(@root, "docs/PROTOCOL.md")), "\n## 4.", parts: 2)

    [section | _] = String.split(section, "\n## 5.", parts: 2)

    for "| " <> row <- String.split(section, "\n"),
        [first | _] = String.split(row, " | "),
        String.starts_with?(first, "`:"),
        [_, name] <- Regex.scan(~r/`:(\w+)/, first) ++ Regex.scan(~r/ :(\w+)/, first),
        uniq: true,
        do: String.to_atom(name)
  end

  test "the Elixir registry equals the worker's: same families, ops, arities and options" do
    python = python_listing()
    elixir = elixir_listing()
    assert length(elixir) > 100
    assert Enum.sort(elixir) -- Enum.sort(python) == []
    assert Enum.sort(python) -- Enum.sort(elixir) == []
    # the families in the same order, each op in the same place
    assert elixir == python
  end

  test "PROTOCOL.md's op tables list exactly the registry's ops" do
    documented = protocol_ops()
    assert :window_scatter_max in documented and :exp in documented
    assert Enum.sort(documented) == Enum.sort(NxJax.Ops.ops())
  end

  test "a graph with an op the worker does not have is refused before it is sent" do
    bad = fn x -> Nx.Defn.Expr.expr(:no_such_op, [x], %{}, x) end

    assert_raise ArgumentError, ~r/:no_such_op is not an op of the wire graph/, fn ->
      Nx.Defn.jit(bad).(Nx.tensor([1.0, 2.0]))
    end

    too_many = fn x -> Nx.Defn.Expr.expr(:exp, [x, x], %{}, x) end

    assert_raise ArgumentError, ~r/graph op :exp takes 1 inputs, got 2/, fn ->
      Nx.Defn.jit(too_many).(Nx.tensor([1.0, 2.0]))
    end

    # inside a sub-graph too
    body = {:nx_jax_graph, 1, [{0, :no_such_op, [], %{}, {{:f, 32}, {2}}}], [0]}
    loop = {:nx_jax_graph, 1, [{0, :while, [0], %{body: body, condition: body}, nil}], [0]}

    assert_raise ArgumentError, ~r/:no_such_op is not an op/, fn ->
      NxJax.Ops.check_graph!(loop)
    end

    # nothing reached the worker: it still serves
    assert Nx.Defn.jit(&Nx.exp/1).(Nx.tensor(0.0)) == Nx.tensor(1.0)
  end

  test "every op the tracer writes for the Nx API is in the registry" do
    fun = fn x, y ->
      {Nx.sum(Nx.exp(x)), Nx.dot(x, y), Nx.argmax(x, axis: 1), Nx.cumulative_sum(x, axis: 1),
       Nx.window_max(x, {1, 2}), Nx.take(x, Nx.tensor([0, 1]), axis: 1),
       elem(Nx.LinAlg.qr(Nx.dot(x, y)), 0), Nx.fft(x), Nx.sort(x, axis: 1),
       Nx.Defn.Kernel.stop_grad(x)}
    end

    outputs = Nx.Defn.debug_expr(fun).(Nx.iota({2, 3}, type: :f32), Nx.iota({3, 2}, type: :f32))
    {nodes, _} = Nx.Defn.WireEncoder.nodes(outputs)
    used = nodes |> Enum.map(&elem(&1, 1)) |> Enum.uniq()
    assert Enum.all?(used, &match?({:ok, _}, NxJax.Ops.fetch(&1)))
    assert :qr in used and :stop_grad in used and :window_max in used
  end
end
