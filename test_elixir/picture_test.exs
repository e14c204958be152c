defmodule NxJax.PictureTest do
  # Graph pictures: Nx.Defn.Dot.to_dot/2 (the DOT text), NxJax.Picture.render/3 and
  # mix nx_jax.picture (Graphviz's dot: a stand-in script here, so the tests need no Graphviz)
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  doctest Nx.Defn.Dot

  defmodule Fns do
    import Nx.Defn

    defn log1pexp(t), do: Nx.log1p(Nx.exp(t))

    defn custom(t) do
      custom_grad(log1pexp(t), [t], fn g -> [g * (1 - 1 / (1 + Nx.exp(t)))] end)
    end

    defn grad_custom(t), do: grad(t, &custom/1)

    defn mixed(x) do
      {y, _i} =
        while {y = x, i = 0}, i < 3 do
          {y * 2, i + 1}
        end

      stop_grad(y) + x
    end

    defn wrapped(x, w) do
      h = Nx.tanh(x * w)
      s = stop_grad(Nx.exp(h) * 2 + 1)
      m = Nx.Defn.Expr.metadata(Nx.sin(h) * 3, %{name: :tagged})
      Nx.sum(h * s + m)
    end

    defn grad_wrapped(x, w), do: grad(w, &wrapped(x, &1))
  end

  # node label (op and type) -> the labels of the clusters it is drawn in, outermost first
  defp placement(dot) do
    {placed, []} =
      dot
      |> String.split("\n")
      |> Enum.reduce({%{}, []}, fn line, {placed, stack} ->
        cond do
          line =~ ~r/^\s*subgraph cluster_\d+ \{$/ ->
            {placed, [:pending | stack]}

          match?([:pending | _], stack) ->
            [_, label] = Regex.run(~r/label="([^"]*)"/, line)
            {placed, [label | tl(stack)]}

          line =~ ~r/^\s*\}$/ and stack != [] ->
            {placed, tl(stack)}

          match = Regex.run(~r/^\s*n\d+ \[label="([^"]*)"/, line) ->
            {Map.update(
               placed,
               Enum.at(match, 1),
               [Enum.reverse(stack)],
               &[Enum.reverse(stack) | &1]
             ), stack}

          true ->
            {placed, stack}
        end
      end)

    placed
  end

  defp declared(dot), do: Regex.scan(~r/^\s+(n\d+) \[label=/m, dot) |> Enum.map(&Enum.at(&1, 1))

  test "a custom gradient inside a grad: clusters, colours, each node declared once" do
    expr = Nx.Defn.debug_expr(&Fns.grad_custom/1).(Nx.tensor(1.0))
    dot = Nx.Defn.Dot.to_dot(expr, title: "log1pexp")
    {nodes, [output]} = Nx.Defn.WireEncoder.nodes(expr)

    ids = declared(dot)
    assert Enum.sort(ids) == Enum.sort(for {id, _, _, _, _} <- nodes, do: "n#{id}")
    assert length(Enum.uniq(ids)) == length(ids)
    edges = Regex.scan(~r/^\s+n\d+ -> n\d+/m, dot)
    custom = Enum.find(nodes, &match?({_, :custom_grad, _, _, _}, &1))
    {custom_id, :custom_grad, _, %{grads: grads}, _} = custom
    inputs = Enum.sum(for {_, _, inputs, _, _} <- nodes, do: length(inputs))
    assert length(edges) == inputs + length(grads)
    assert dot =~ ~s(label="log1pexp"; labelloc=t;)
    assert dot =~ ~r/label="differentiated by grad \(node \d+\)"; style=filled; color="#dce9f9"/
    assert dot =~ ~s(label="custom_grad's gradient \(node #{custom_id}\)")
    assert dot =~ ~r/n\d+ \[label="grad\\n\(f32\)", style=filled, fillcolor="#f4a6a6"\]/
    assert dot =~ ~s(n#{output} [label="elem 0\\nf32", peripheries=2])
    assert dot =~ ~r/n\d+ -> n#{custom_id} \[style=dashed\]/
    assert dot =~ ~s([label="cotangent\\nf32"])
  end

  test "loops say how many nodes their sub-graphs hold; stop_grad is dashed" do
    dot = Nx.Defn.Dot.to_dot(Nx.Defn.debug_expr(&Fns.mixed/1).(Nx.tensor(1.0)))
    assert dot =~ ~r/\[label="while\\nbody: \d+ nodes\\ncondition: \d+ nodes\\n\(f32, s64\)"\]/
    assert dot =~ ~s([label="stop_grad\\nf32", style=dashed, color="grey40", fontcolor="grey40"])
  end

  test "stop_grad and metadata are clusters of what they wrap, nested in the grad's" do
    expr = Nx.Defn.debug_expr(&Fns.grad_wrapped/2).(Nx.tensor([1.0, 2.0]), Nx.tensor(0.5))
    placed = placement(Nx.Defn.Dot.to_dot(expr))
    grad = ~r/^differentiated by grad \(node \d+\)$/
    stopped = ~r/^stop_grad \(node \d+\): no gradient flows back$/
    tagged = ~r/^metadata :name \(node \d+\)$/

    # what stop_grad wraps (exp, its constants, the stop_grad itself) in its own cluster,
    # inside the grad's; tanh, read outside it too, stays in the grad's
    for label <- ["exp\\nf32[2]", "constant 2.0\\nf32", "stop_grad\\nf32[2]"] do
      assert [[outer, inner]] = placed[label]
      assert outer =~ grad and inner =~ stopped
    end

    assert [[outer, inner]] = placed["sin\\nf32[2]"]
    assert outer =~ grad and inner =~ tagged
    assert [[outer]] = placed["tanh\\nf32[2]"]
    assert outer =~ grad
    # the copy of w that grad marks wraps nothing of its own: a node, no cluster
    assert [[outer]] = placed["metadata :grad_input\\nf32"]
    assert outer =~ grad
    assert placed["parameter 0\\nf32[2]"] == [[]]
  end

  test "print_expr with dot: true prints the DOT text and returns the expression" do
    x = Nx.Defn.Expr.parameter(0, {:f, 32}, {2})
    expr = Nx.exp(x)
    output = capture_io(fn -> assert Nx.Defn.Kernel.print_expr(expr, dot: true) == expr end)
    assert output == Nx.Defn.Dot.to_dot(expr) <> "\n"
  end

  describe "render and mix nx_jax.picture" do
    setup do
      dir = Path.join(System.tmp_dir!(), "nx_jax_dot_#{System.unique_integer([:positive])}")
      File.mkdir_p!(dir)
      # a stand-in for Graphviz: records its arguments and writes the DOT text it was given
      fake = Path.join(dir, "dot")
      File.write!(fake, "#!/bin/sh\necho \"$@\" > \"$3.args\"\ncat \"$4\" > \"$3\"\n")
      File.chmod!(fake, 0o755)
      on_exit(fn -> File.rm_rf!(dir) end)
      %{dir: dir, fake: fake}
    end

    test "render hands the DOT text to dot in the format of the extension", %{
      dir: dir,
      fake: fake
    } do
      expr = Nx.Defn.debug_expr(&Fns.grad_custom/1).(Nx.tensor(1.0))
      svg = Path.join(dir, "g.svg")
      assert NxJax.Picture.render(expr, svg, dot: fake, title: "t") == :ok
      assert File.read!(svg) == NxJax.Picture.to_dot(expr, title: "t")
      assert File.read!(svg <> ".args") == "-Tsvg -o #{svg} #{svg}.dot\n"
      refute File.exists?(svg <> ".dot")
      # .dot: the text itself, no Graphviz needed
      assert NxJax.Picture.render(expr, Path.join(dir, "g.dot")) == :ok
      assert File.read!(Path.join(dir, "g.dot")) == NxJax.Picture.to_dot(expr)
    end

    test "without Graphviz the error says how to install it", %{dir: dir} do
      error =
        assert_raise ArgumentError, fn ->
          NxJax.Picture.render(Nx.tensor(1.0), Path.join(dir, "g.png"), dot: "/nonexistent/dot")
        end

      assert error.message =~ "sudo apt-get install graphviz"

      assert_raise ArgumentError, ~r/writes .svg, .png, .pdf or .dot files/, fn ->
        NxJax.Picture.render(Nx.tensor(1.0), Path.join(dir, "g.txt"))
      end
    end

    test "mix nx_jax.picture traces Module.function on numbers", %{dir: dir, fake: fake} do
      out = Path.join(dir, "task.svg")
      args = ["NxJax.PictureTest.Fns.grad_custom", "1.0", "--output", out, "--dot", fake]
      assert capture_io(fn -> Mix.Tasks.NxJax.Picture.run(args) end) =~ "wrote #{out}"
      assert File.read!(out) =~ ~s(label="NxJax.PictureTest.Fns.grad_custom\(1.0\)")
      assert File.read!(out) =~ "custom_grad's gradient"

      assert_raise Mix.Error, ~r/NxJax.PictureTest.Fns.nope\/1 is not defined/, fn ->
        Mix.Tasks.NxJax.Picture.run(["NxJax.PictureTest.Fns.nope", "1.0", "--output", out])
      end
    end

    test "the old names NxJax.Graph and mix nx_jax.graph draw the same (the task warns)",
         %{dir: dir, fake: fake} do
      expr = Nx.Defn.debug_expr(&Fns.grad_custom/1).(Nx.tensor(1.0))
      # (apply/3: a direct call to a deprecated function warns when the test compiles)
      dot = apply(NxJax.Graph, :to_dot, [expr, [title: "t"]])
      assert dot == NxJax.Picture.to_dot(expr, title: "t") and dot =~ "digraph"
      assert apply(NxJax.Graph, :render, [expr, Path.join(dir, "old.dot")]) == :ok
      assert File.read!(Path.join(dir, "old.dot")) == NxJax.Picture.to_dot(expr)

      [new, old] = for name <- ["new", "old"], do: Path.join(dir, name <> ".svg")
      args = &["NxJax.PictureTest.Fns.grad_custom", "1.0", "--output", &1, "--dot", fake]

      stderr =
        capture_io(:stderr, fn ->
          assert capture_io(fn -> Mix.Tasks.NxJax.Graph.run(args.(old)) end) =~ "wrote #{old}"
        end)

      assert [line] = String.split(stderr, "\n", trim: true)
      assert line =~ "mix nx_jax.graph is deprecated: use mix nx_jax.picture"
      assert capture_io(fn -> Mix.Tasks.NxJax.Picture.run(args.(new)) end) =~ "wrote #{new}"
      assert File.read!(old) == File.read!(new)
      assert File.read!(new) =~ "custom_grad's gradient"
    end
  end
end
