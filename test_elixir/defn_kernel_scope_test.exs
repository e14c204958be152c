defmodule NxJax.DefnKernelScopeTest do
  # What a defn body may call, as in Nx 0.7.2: Nx.Defn.Kernel's functions and macros in place
  # of Kernel's (Kernel's others are "undefined function ... (there is no such import)"),
  # `Kernel.` naming Nx.Defn.Kernel, and Kernel's functions inside the closures the body writes
  # (a hook's `fn`, a capture). Each expectation was checked against real Nx 0.7.2's defn
  # (the same bodies compiled under `NX_JAX_NX=_build/real-nx-src`, 2026-12-07).
  use ExUnit.Case, async: true

  defp compile(name, body) do
    module = Module.concat(__MODULE__, name)

    source = """
    defmodule #{inspect(module)} do
      import Nx.Defn
      defn f(x) do
        #{body}
      end
    end
    """

    Code.compile_string(source)
    module
  end

  defp compile_error(name, body) do
    error = assert_raise CompileError, fn -> compile(name, body) end
    error.description
  end

  test "Kernel's functions that Nx.Defn.Kernel does not replace are not imported in the body" do
    assert compile_error(Apply, "apply(Nx, :exp, [x])") ==
             "undefined function apply/3 (there is no such import)"

    assert compile_error(Length, "x + length([1, 2])") ==
             "undefined function length/1 (there is no such import)"

    assert compile_error(Self, "(_ = self(); x)") ==
             "undefined function self/0 (there is no such import)"

    assert compile_error(Guard, "if is_integer(1), do: x, else: x + 1") ==
             "undefined function is_integer/1 (there is no such import)"
  end

  test "Nx.Defn.Kernel's replacements are, and `Kernel.` names Nx.Defn.Kernel" do
    assert compile(Plus, "Kernel.+(x, 1)").f(Nx.tensor(2.0)) == Nx.tensor(3.0)
    assert compile(Max, "max(x, 1) + elem({x, 1}, 0)").f(Nx.tensor(2.0)) == Nx.tensor(4.0)

    assert compile(Then, "x |> Nx.exp() |> then(&Nx.add(&1, 1))").f(Nx.tensor(0.0)) ==
             Nx.tensor(2.0)
  end

  test "the closures the body writes see Kernel: a hook's fn and capture" do
    # (hooks run in the calling process, this test's)
    fun =
      compile(Hooks, """
      x
      |> hook(fn t -> send(self(), {:fn, length([t]), is_struct(t)}) end)
      |> hook(&send(self(), {:capture, apply(Nx, :to_number, [&1])}))
      |> hook(&send(self(), {:half, length([&1]) / 2}))
      """)

    assert fun.f(Nx.tensor(2.0)) == Nx.tensor(2.0)
    assert_received {:fn, 1, true}
    assert_received {:capture, 2.0}
    assert_received {:half, 0.5}
  end

  test "cond's clauses stay defn code, not closures" do
    assert compile_error(Cond, "cond do\n x > 0 -> x + length([1])\n true -> x\n end") ==
             "undefined function length/1 (there is no such import)"
  end
end
