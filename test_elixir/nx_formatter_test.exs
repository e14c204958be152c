defmodule NxJax.NxFormatterTest do
  # The forms the clean-room Nx exports to its users' formatters (nx/.formatter.exs, read by
  # `import_deps: [:nx]`) are those of Nx 0.7.2's .formatter.exs, and with them the formatter
  # keeps Nx.Defn's definitions and while loops written without parentheses. (A project that
  # imports them through Mix: nx_project_test.exs.)
  use ExUnit.Case, async: true

  @formatter Path.expand("../nx/.formatter.exs", __DIR__)

  # Nx 0.7.2's .formatter.exs: its locals_without_parens, exported
  @nx_forms [
    defn: 2,
    defnp: 2,
    deftransform: 1,
    deftransform: 2,
    deftransformp: 1,
    deftransformp: 2,
    while: 3
  ]

  defp exported do
    {config, _binding} = Code.eval_file(@formatter)
    config |> Keyword.fetch!(:export) |> Keyword.fetch!(:locals_without_parens)
  end

  test "nx/.formatter.exs exports Nx 0.7.2's forms, and formats nx/ with them" do
    {config, _binding} = Code.eval_file(@formatter)
    assert Enum.sort(exported()) == Enum.sort(@nx_forms)
    assert Enum.sort(config[:locals_without_parens]) == Enum.sort(@nx_forms)
  end

  test "the formatter keeps the forms without parentheses with them, and not without" do
    source = """
    defmodule M do
      import Nx.Defn

      defn f(x), do: x
      defnp g(x), do: x
      deftransform h(x)
      deftransform h(x), do: x
      deftransformp k(x)
      deftransformp k(x), do: x

      defn loop(x) do
        while {x, i = 0}, i < 3, do: {x + i, i + 1}
      end
    end
    """

    formatted = fn opts -> IO.iodata_to_binary([Code.format_string!(source, opts), "\n"]) end
    assert formatted.(locals_without_parens: exported()) == source

    without = formatted.([])
    assert without =~ "  defn(f(x), do: x)\n"
    assert without =~ "  defnp(g(x), do: x)\n"
    assert without =~ "  deftransform(h(x))\n"
    assert without =~ "  deftransformp(k(x), do: x)\n"
    assert without =~ "    while({x, i = 0}, i < 3, do: {x + i, i + 1})\n"
  end
end
