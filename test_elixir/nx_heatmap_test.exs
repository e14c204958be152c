defmodule NxJax.NxHeatmapTest do
  # Nx.to_heatmap/2 and the inspection of Nx.Heatmap as Nx 0.7.2 prints them, character for
  # character (ANSI escapes included): the expected answers are real Nx 0.7.2's,
  # test_elixir/reference/nx_0.7.2_heatmap.tsv, written by nx_heatmap_reference.exs from
  # the cases of nx_heatmap_cases.exs.
  use ExUnit.Case, async: true

  @dir Path.join(__DIR__, "reference")
  @reference Path.join(@dir, "nx_0.7.2_heatmap.tsv")
  @external_resource @reference
  @external_resource Path.join(@dir, "nx_heatmap_cases.exs")

  # where we knowingly answer otherwise (Nx 0.7.2's inspection fails on both), with our answer
  @differs %{
    # a matrix inspected with limit: 0 is drawn whole, as with limit: 1
    "limit_0_rank2" => ~S(ok	"#Nx.Heatmap<\n  s64[2][3]\n  \n  024\n  579\n>"),
    # refused where it is made, with a message
    "complex" =>
      "error\tArgumentError: cannot show heatmap for complex tensors (their values have no " <>
        "order), got a tensor of type c64: take Nx.abs/1, Nx.real/1 or Nx.phase/1 of it first"
  }

  @expected @reference
            |> File.read!()
            |> String.split("\n", trim: true)
            |> Enum.map(fn line ->
              [name, answer] = String.split(line, "\t", parts: 2)
              {name, answer}
            end)

  defp cases do
    {{cases, answer}, _} = Code.eval_file(Path.join(@dir, "nx_heatmap_cases.exs"))
    {cases, answer}
  end

  test "the reference answers every case, in order" do
    {cases, _answer} = cases()
    assert Enum.map(cases, &elem(&1, 0)) == Enum.map(@expected, &elem(&1, 0))
    assert Enum.all?(Map.keys(@differs), &List.keymember?(@expected, &1, 0))
  end

  test "every case prints as Nx 0.7.2 prints it" do
    {cases, answer} = cases()
    expected = Map.new(@expected)

    mismatches =
      for {name, fun} <- cases,
          ours = answer.(fun),
          ours != Map.get(@differs, name, expected[name]),
          do: {name, ours, expected[name]}

    assert mismatches == []
  end

  test "the listed differences still differ from Nx 0.7.2 (whose inspection fails)" do
    expected = Map.new(@expected)

    for {name, ours} <- @differs do
      refute ours == expected[name], name
      assert expected[name] =~ "#Inspect.Error<", name
    end
  end

  describe "the struct" do
    test "keeps the tensor and the options as given" do
      t = Nx.tensor([[1, 2], [3, 4]])

      assert %Nx.Heatmap{tensor: ^t, opts: [ansi_whitespace: " "]} =
               Nx.to_heatmap(t, ansi_whitespace: " ")
    end
  end

  describe "access" do
    test "a single element is a tensor, a slice a heatmap with the same options" do
      heatmap = Nx.to_heatmap(Nx.tensor([[1, 2], [3, 4]]), ansi_whitespace: "\s")
      assert heatmap[[0, 1]] == Nx.tensor(2)
      assert heatmap[0] == Nx.to_heatmap(Nx.tensor([1, 2]), ansi_whitespace: "\s")
      assert heatmap[0..0] == Nx.to_heatmap(Nx.tensor([[1, 2]]), ansi_whitespace: "\s")
    end

    test "writing through it raises as writing into a tensor does" do
      heatmap = Nx.to_heatmap(Nx.tensor([[1, 2], [3, 4]]))
      assert_raise ArgumentError, ~r/tensors are immutable/, fn -> put_in(heatmap[0], 1) end
      assert_raise ArgumentError, ~r/is not supported/, fn -> pop_in(heatmap[0]) end
    end
  end
end

defmodule NxJax.NxHeatmapAnsiDefaultTest do
  # async: false: sets Elixir's own :ansi_enabled, which other tests' output may read
  use ExUnit.Case, async: false

  test "the default of :ansi_enabled is IO.ANSI.enabled?/0, read when inspected" do
    previous = Application.fetch_env(:elixir, :ansi_enabled)
    heatmap = Nx.to_heatmap(Nx.tensor([1, 2]))

    try do
      Application.put_env(:elixir, :ansi_enabled, true)
      assert inspect(heatmap) == inspect(Nx.to_heatmap(Nx.tensor([1, 2]), ansi_enabled: true))
      assert inspect(heatmap) =~ "\e[48;5;232m"
      Application.put_env(:elixir, :ansi_enabled, false)
      assert inspect(heatmap) == "#Nx.Heatmap<\n  s64[2]\n  09\n>"
    after
      case previous do
        {:ok, value} -> Application.put_env(:elixir, :ansi_enabled, value)
        :error -> Application.delete_env(:elixir, :ansi_enabled)
      end
    end
  end
end
