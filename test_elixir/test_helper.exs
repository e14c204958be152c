# how the reference data of test_elixir/reference/ write a result (shared with its generators)
Code.require_file("reference/reference_format.exs", __DIR__)
# the cases of real programs whose answers real Nx 0.7.2 gave (NxProgramsCases.compare/1)
Code.require_file("reference/nx_programs_cases.exs", __DIR__)

defmodule NxJax.TestTime do
  @moduledoc """
  The one factor by which the tests' waits are scaled: `NX_JAX_TEST_TIME_SCALE`, a positive
  number (default 1), read here and by the Python suite's helper (tests/); on a slow or busy
  machine, `NX_JAX_TEST_TIME_SCALE=3 mix test` gives every bounded wait three times as long.
  """

  @variable "NX_JAX_TEST_TIME_SCALE"

  @doc "The factor: #{@variable} as a positive number, 1 when it is unset (or empty)."
  def scale do
    case System.get_env(@variable) do
      nil -> 1
      text -> parse(String.trim(text))
    end
  end

  defp parse(""), do: 1

  defp parse(text) do
    case Float.parse(text) do
      {scale, ""} when scale > 0 ->
        scale

      _ ->
        raise ArgumentError,
              "#{@variable} must be a positive number (the factor by which the tests' waits " <>
                "are scaled, e.g. 3 or 2.5), got: #{inspect(text)}"
    end
  end

  @doc "`base` milliseconds times the scale, rounded to an integer (`:infinity` stays)."
  def ms(:infinity), do: :infinity
  def ms(base) when is_number(base) and base >= 0, do: round(base * scale())
end

defmodule NxJax.TestMailbox do
  @moduledoc false
  # The values of the `{tag, value}` messages already in the test process's mailbox, oldest
  # first, taken out of it (the hook tests collect what their hooks sent).
  def take(tag) do
    receive do
      {^tag, value} -> [value | take(tag)]
    after
      0 -> []
    end
  end
end

defmodule NxJax.TestPool do
  @moduledoc false
  # For test modules (async: false) that need a pool of their own: replaces the application's
  # pool with one of `size` workers until the module's tests are done, then restores it.
  import ExUnit.Callbacks, only: [on_exit: 1]

  def replace_application_pool(size) do
    :ok = Supervisor.terminate_child(NxJax.Supervisor, NxJax.Pool)
    {:ok, pool} = NxJax.Pool.start_link(size: size)
    Process.unlink(pool)

    on_exit(fn ->
      Supervisor.stop(pool)
      {:ok, _} = Supervisor.restart_child(NxJax.Supervisor, NxJax.Pool)
    end)

    :ok
  end
end

defmodule NxJax.TestAssertions do
  @moduledoc false
  import ExUnit.Assertions

  # every element of `t` within `tol` (relative, absolute below 1.0) of the (nested) list
  def assert_close(%Nx.Tensor{} = t, expected, tol \\ 1.0e-12) do
    actual = Nx.to_flat_list(t)
    expected = List.flatten(expected)
    assert length(actual) == length(expected)

    for {a, e} <- Enum.zip(actual, expected) do
      assert abs(a - e) <= tol * max(1.0, abs(e)),
             "expected #{inspect(expected)}, got #{inspect(actual)}"
    end
  end

  # the gradient of sum(fun.(x)) against central differences
  def check_grad(fun, x) do
    scalar = fn x -> Nx.sum(fun.(x)) end
    assert :ok = NxJax.GradCheck.check_grads!(scalar, fn x -> Nx.Defn.grad(x, scalar) end, x)
  end

  # polls `check` every 10 ms until it returns a truthy value (then true) or `base_ms`
  # milliseconds, scaled by NxJax.TestTime, have passed (then false: assert the result)
  def wait_until(check, base_ms \\ 2_000), do: wait_for(check, base_ms) not in [nil, false]

  # as wait_until/2, but returns `fun`'s first truthy value (or its last value, nil or false)
  def wait_for(fun, base_ms \\ 2_000) do
    poll(fun, System.monotonic_time(:millisecond) + NxJax.TestTime.ms(base_ms))
  end

  defp poll(fun, deadline) do
    value = fun.()

    cond do
      value -> value
      System.monotonic_time(:millisecond) >= deadline -> value
      true -> Process.sleep(10) && poll(fun, deadline)
    end
  end

  # whether the worker registered as `name` runs another Python process than `os_pid` within
  # `base_ms` milliseconds, scaled (while its supervisor restarts it, the name is briefly
  # unregistered)
  def replaced?(name, os_pid, base_ms \\ 5_000) do
    wait_until(
      fn ->
        try do
          NxJax.Worker.os_pid(name) != os_pid
        catch
          :exit, _ -> false
        end
      end,
      base_ms
    )
  end
end

defmodule NxJax.TestGraphs do
  @moduledoc false

  # an encoded graph: `first` (node 0), then `dots` nodes each the dot of the one before with
  # itself, all of type and shape `dims`; the last is the output (the tests' slow graphs)
  def dot_chain(first, dots, dims) do
    dot = %{contract_axes: {[1], [0]}, batch_axes: {[], []}}
    chain = for i <- 1..dots, do: {i, :dot, [i - 1, i - 1], dot, dims}
    :erlang.term_to_binary({:nx_jax_graph, 1, [first | chain], [dots]})
  end
end

# The outer bound of every test, set once (a module with longer tests raises it with a
# @moduletag scaled the same way); waits on real work inside a test may be :infinity. It is
# well past a call's own 60 s timeout: a table-driven test (nx_linalg, nx_names: 9-14 s
# alone) passed 120 s in 3 of 4 loaded full runs, waiting on a reply; a reply that never
# comes now fails as the call's Timeout error, not as a test timeout.
#
# NX_JAX_TEST_COMPILER=seam (`make test-seam`) runs only the tests tagged :seam, with
# NxJax.Test.SeamCompiler (in Elixir, no worker) the default compiler of every defn
# (test_elixir/support/seam_run.ex); unset, every test runs on the default compiler, NxJax.
seam_options =
  if NxJax.Test.SeamRun.active?() do
    NxJax.Test.SeamRun.start()
    [include: [:seam], exclude: [:test]]
  else
    []
  end

ExUnit.start(
  [timeout: NxJax.TestTime.ms(300_000), assert_receive_timeout: NxJax.TestTime.ms(1_000)] ++
    seam_options
)
