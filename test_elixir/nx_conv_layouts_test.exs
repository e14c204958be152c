defmodule NxJax.NxConvLayoutsTest do
  # Convolutions in other layouts than {batch, channels, spatial...} (channels-last inputs
  # and outputs, kernels {height, width, in, out}, axis names in the permutations; with
  # groups, strides, dilations, padding and transposed convolutions; their gradients), and
  # which of tied elements window_scatter_max/min (and so the gradients of window_max/min)
  # select: the answers of real Nx 0.7.2, test_elixir/reference/nx_0.7.2_layouts.tsv,
  # written by nx_layouts_reference.exs from the cases of nx_layouts_cases.exs.
  use ExUnit.Case, async: true

  alias NxJax.ReferenceFormat, as: Format

  @dir Path.join(__DIR__, "reference")
  @cases_file Path.join(@dir, "nx_layouts_cases.exs")
  @reference_file Path.join(@dir, "nx_0.7.2_layouts.tsv")
  @external_resource @cases_file
  @external_resource @reference_file

  {cases, _} = Code.eval_file(@cases_file)
  @cases cases

  @reference Map.new(Format.rows(@reference_file), fn [name | answer] -> {name, answer} end)

  # where we still answer otherwise, with our answer (none: the gradient of window_max/min
  # follows Nx's rule, window_scatter_max/min's choice of the last of tied elements, in
  # numerics mode :nx)
  @differs %{}

  defp answer(code) do
    {value, _} = Code.eval_string(code)
    leaves = Format.leaves(value)
    ["ok", Format.leaves_line(value), Enum.map_join(leaves, " ; ", &inspect(&1.names))]
  rescue
    e -> ["error", Format.exception(e)]
  end

  test "the reference answers every case" do
    assert Enum.sort(Enum.map(@cases, &elem(&1, 0))) == Enum.sort(Map.keys(@reference))
    assert Enum.all?(Map.keys(@differs), &Map.has_key?(@reference, &1))
  end

  groups = Enum.group_by(@cases, fn {name, _} -> name |> String.split("_") |> hd() end)

  for {group, cases} <- groups do
    @group_cases cases
    test "real Nx 0.7.2's bits, shapes and names: #{group} (#{length(cases)} cases)" do
      mismatches =
        for {name, code} <- @group_cases,
            expected = Map.get(@differs, name, @reference[name]),
            (got = answer(code)) != expected,
            do: {name, got, expected}

      assert mismatches == []
    end
  end

  test "the issue's examples" do
    r =
      Nx.conv(Nx.iota({1, 9, 9, 2}, type: :f32), Nx.iota({3, 2, 2, 2}, type: :f32),
        input_permutation: [0, 3, 1, 2],
        output_permutation: [0, 3, 1, 2]
      )

    assert Nx.shape(r) == {1, 8, 8, 3}

    r =
      Nx.conv(Nx.iota({1, 4, 4, 2}, type: :f32), Nx.iota({3, 2, 2, 2}, type: :f32),
        input_permutation: [0, 3, 1, 2],
        output_permutation: [0, 3, 1, 2]
      )

    # Nx 0.7.2's first row
    assert r |> Nx.slice([0, 0, 0, 0], [1, 1, 3, 3]) |> Nx.to_flat_list() ==
             [198.0, 550.0, 902.0, 254.0, 734.0, 1214.0, 310.0, 918.0, 1526.0]

    t = Nx.tensor([[2, 2, 5, 5]])
    source = Nx.tensor([[1, 7]])

    assert Nx.window_scatter_min(t, source, 0, {1, 2}, strides: [1, 2]) ==
             Nx.tensor([[0, 1, 0, 7]])
  end

  test "channels-last conv gradients agree with finite differences" do
    opts = [
      input_permutation: [0, 3, 1, 2],
      output_permutation: [0, 3, 1, 2],
      kernel_permutation: [3, 2, 0, 1],
      strides: [2, 1],
      padding: :same,
      feature_group_size: 2
    ]

    x = Nx.iota({2, 5, 4, 4}, type: :f64) |> Nx.divide(40) |> Nx.sin()
    k = Nx.iota({3, 2, 2, 4}, type: :f64) |> Nx.divide(10) |> Nx.cos()
    w = Nx.iota({2, 3, 4, 4}, type: :f64) |> Nx.divide(7)

    loss = fn x, k -> Nx.conv(x, k, opts) |> Nx.multiply(w) |> Nx.sum() end
    assert NxJax.GradCheck.check_grads!(loss, [x, k], modes: [:rev]) == :ok
  end
end
