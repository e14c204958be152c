defmodule NxJax.KernelExportsTest.Preprocess do
  # A common name for a preprocessing step: it compiles only if Nx.Defn.Kernel, which defn
  # bodies import, has no transform/2 (Nx 0.7.2's has none).
  import Nx.Defn

  defn transform(a, b), do: a * 2 + b
  defn run(a, b), do: transform(a, b) |> Nx.sum()
end

defmodule NxJax.KernelExportsTest do
  # Our Nx.Defn.Kernel exports exactly what real Nx 0.7.2's does (the list is
  # test_elixir/reference/nx_0.7.2_kernel_exports.txt, written by
  # nx_kernel_exports_reference.exs in the same folder), and what defn bodies get from it
  # and from `import Nx.Defn` works as there. Values are real Nx 0.7.2's, printed by
  # test_elixir/reference/nx_grad_leaves_reference.exs.
  use ExUnit.Case, async: true

  import Nx.Defn

  @reference Path.join(__DIR__, "reference/nx_0.7.2_kernel_exports.txt")

  defp ours do
    for kind <- [:functions, :macros], {name, arity} <- Nx.Defn.Kernel.__info__(kind) do
      "#{if kind == :functions, do: "function", else: "macro"} #{name}/#{arity}"
    end
    |> Enum.sort()
  end

  test "Nx.Defn.Kernel's functions and macros are Nx 0.7.2's, name by name" do
    real = @reference |> File.read!() |> String.split("\n", trim: true)
    assert ours() -- real == []
    assert real -- ours() == []
  end

  test "a module with its own defn transform/2 compiles and calls it from another defn" do
    alias NxJax.KernelExportsTest.Preprocess
    assert Preprocess.run(Nx.tensor([1.0, 2.0]), 1.0) == Nx.tensor(8.0)
    assert Preprocess.transform(Nx.tensor(1), 2) == Nx.tensor(4)
  end

  defn grad1(x), do: grad(fn x -> Nx.sin(x) * x end).(x)
  defn vg1(x), do: value_and_grad(fn x -> Nx.sin(x) * x end).(x)

  test "grad/1 and value_and_grad/1 inside defn return functions of x (Nx.Defn's)" do
    assert grad1(Nx.tensor(1.0)) == Nx.tensor(1.3817732334136963)
    assert vg1(Nx.tensor(1.0)) == {Nx.tensor(0.8414709568023682), Nx.tensor(1.3817732334136963)}
    # d/dx (x sin x) = sin x + x cos x
    assert_in_delta Nx.to_number(grad1(Nx.tensor(1.0))), :math.sin(1) + :math.cos(1), 1.0e-6
  end

  @scale 3

  defn kernel_helpers(t, opts \\ []) do
    opts = assert_keys(opts, [:label])
    label = opts[:label] <> "!"
    all = t[..]

    if Nx.rank(t) != 1 do
      raise ArgumentError, "expected a vector, got: " <> inspect(Nx.shape(t))
    end

    {label,
     all |> Nx.multiply(@scale) |> tap(&send(self(), {:traced, &1.shape})) |> then(&(&1 + 1))}
  end

  test "the helpers Nx 0.7.2's Kernel has: .., assert_keys, inspect, raise, @, <>, |>, tap, then" do
    assert kernel_helpers(Nx.tensor([1, 2]), label: "x") == {"x!", Nx.tensor([4, 7])}
    assert_received {:traced, {2}}

    assert_raise ArgumentError, "expected key :label in keyword list, got: []", fn ->
      kernel_helpers(Nx.tensor([1, 2]))
    end

    assert_raise ArgumentError, "expected a vector, got: {1, 2}", fn ->
      kernel_helpers(Nx.tensor([[1, 2]]), label: "x")
    end
  end

  test "the special forms Nx.Defn.Kernel documents raise when called through it" do
    message = "special forms must not be imported and exist for documentation purposes"

    assert_raise RuntimeError, message, fn ->
      Code.eval_string("require Nx.Defn.Kernel; Nx.Defn.Kernel.case(1, do: (_ -> 1))")
    end
  end
end
