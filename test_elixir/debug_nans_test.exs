defmodule NxJax.DebugNansTest do
  # debug_nans: true (a jit/defn option): the worker runs the graph op by op and the first NaN
  # or infinity, forward or backward, fails the call naming the op and its line here.
  use ExUnit.Case, async: true

  import Nx.Defn

  @softplus_line __ENV__.line + 1
  defn softplus(t), do: Nx.log1p(Nx.exp(t))

  defn ratio(x) do
    one_plus_root = 1 + Nx.sqrt(x)
    x / one_plus_root
  end

  @root_line __ENV__.line - 4

  defn bad_log(x) do
    y = x - 1.0
    # (the op in tail position: no frame of bad_log is on the stack when it is traced)
    Nx.log(y)
  end

  @log_line __ENV__.line - 3

  defp nested(0, fun), do: fun.()
  defp nested(n, fun), do: n |> Kernel.-(1) |> nested(fun) |> then(&{:ok, &1}) |> elem(1)

  defn stable_ratio(x) do
    value = x / (1 + Nx.sqrt(x))
    custom_grad(value, [x], fn g -> [g * (1 + Nx.sqrt(x) / 2) / (1 + Nx.sqrt(x)) ** 2] end)
  end

  defn hooked(x), do: x |> Nx.exp() |> hook(&send(self(), {:hooked, &1})) |> Nx.multiply(2)

  defp debug(fun, arg), do: Nx.Defn.jit(fun, debug_nans: true).(arg)

  test "finite runs give the jitted values" do
    for t <- [-3.0, 0.5, 20.0] do
      g = fn t -> grad(t, &softplus/1) end
      assert debug(&softplus/1, t) == softplus(t)
      assert debug(g, t) == Nx.Defn.jit(g).(t)
    end
  end

  test "an overflow in the forward pass names exp, its line and its input" do
    error =
      assert_raise NxJax.WorkerError, fn -> debug(fn t -> grad(t, &softplus/1) end, 100.0) end

    assert error.class == "NonFinite"

    assert error.message =~
             "inf first appeared in the forward pass, in the value of exp at " <>
               "test_elixir/debug_nans_test.exs:#{@softplus_line}, computed from finite " <>
               "inputs (input 0: float32 100.0)"

    # without the option the value is silently infinite
    assert Nx.to_number(softplus(100.0)) == :infinity
  end

  test "a NaN made by a gradient rule names the rule's op, its line, and custom_grad" do
    error = assert_raise NxJax.WorkerError, fn -> debug(fn x -> grad(x, &ratio/1) end, 0.0) end
    assert error.class == "NonFinite"

    assert error.message =~
             "nan first appeared in the backward pass of grad"

    assert error.message =~
             "the gradient rule of sqrt at test_elixir/debug_nans_test.exs:#{@root_line} " <>
               "turned a finite incoming gradient"

    assert error.message =~ "its forward inputs: input 0: float32 0.0"
    assert error.message =~ "consider custom_grad/3"
    # (the report has no Python traceback: it names its node itself)
    refute error.message =~ "Traceback"
    # without the option: NaN, silently
    assert Nx.to_number(grad(Nx.tensor(0.0), &ratio/1)) == :nan
  end

  # a regression (2026-12-06): the site came from the stack, which names the caller's line
  # when the op is in tail position (or no line past the VM's 8 frames of stack trace)
  test "the line of the op is named when it is in tail position, at any stack depth, in a script" do
    line =
      "nan first appeared in the forward pass, in the value of log at " <>
        "test_elixir/debug_nans_test.exs:#{@log_line}, computed from finite inputs"

    for depth <- [0, 40] do
      error =
        assert_raise NxJax.WorkerError, fn ->
          nested(depth, fn -> Nx.Defn.jit(&bad_log/1, debug_nans: true).(Nx.tensor(0.5)) end)
        end

      assert error.message =~ line
    end

    dir = Path.join(System.tmp_dir!(), "nx_jax_debug_nans_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    script = Path.join(dir, "bad_log.exs")

    File.write!(script, """
    defmodule NxJax.DebugNansTest.Script do
      import Nx.Defn

      defn bad_log(x) do
        y = x - 1.0
        Nx.log(y)
      end
    end
    """)

    try do
      [{module, _}] = Code.require_file(script)
      fun = Function.capture(module, :bad_log, 1)

      error =
        assert_raise NxJax.WorkerError, fn ->
          Nx.Defn.jit(fun, debug_nans: true).(Nx.tensor(0.5))
        end

      assert error.message =~ "in the value of log at #{Path.relative_to_cwd(script)}:6,"
    after
      File.rm_rf!(dir)
    end
  end

  test "custom_grad gives the finite gradient: nothing to report" do
    assert debug(fn x -> grad(x, &stable_ratio/1) end, 0.0) == Nx.tensor(1.0)
    assert_in_delta Nx.to_number(debug(fn x -> grad(x, &stable_ratio/1) end, 4.0)), 2 / 9, 1.0e-6
  end

  test "hooks fire in a debug run, and the worker serves on after a report" do
    assert debug(&hooked/1, 0.0) == Nx.tensor(2.0)
    assert_received {:hooked, value}
    assert value == Nx.tensor(1.0)
    assert_raise NxJax.WorkerError, fn -> debug(&softplus/1, 100.0) end
    assert hooked(Nx.tensor(0.0)) == Nx.tensor(2.0)
  end
end
