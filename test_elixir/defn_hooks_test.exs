defmodule NxJax.DefnHooksTest do
  # hook/2,3 and print_value/1,2: the Elixir function runs in the calling process with the
  # concrete value while the worker computes (a JAX host callback sends it as a {:hook, ...}
  # frame), and hooks are the identity for gradients.
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)

  import ExUnit.CaptureIO
  import Nx.Defn

  defn exp_hooked(x), do: x |> Nx.exp() |> hook(&send(self(), {:hooked, &1})) |> Nx.multiply(2)

  defn loop_hooked(x) do
    {acc} =
      while {acc = x}, i <- 1..3 do
        {hook(acc + i, &send(self(), {:iteration, &1}))}
      end

    acc
  end

  defn grad_hooked(x) do
    grad(x, fn x ->
      x |> Nx.multiply(x) |> hook(&send(self(), {:forward, &1})) |> Nx.multiply(3)
    end)
  end

  defn value_and_grad_hooked(x) do
    value_and_grad(x, fn x -> x |> Nx.sin() |> hook(&send(self(), {:forward, &1})) end)
  end

  defn hooked_grad(x), do: hook(grad(x, &Nx.sin/1), &send(self(), {:gradient, &1}))

  defn grad_stop_hooked(x) do
    grad(x, fn x -> stop_grad(hook(Nx.exp(x), &send(self(), {:stopped, &1}))) + x * x end)
  end

  defn custom_hooked(t) do
    value = hook(Nx.log1p(Nx.exp(t)), &send(self(), {:forward, &1}))

    custom_grad(value, [t], fn g ->
      [hook(g, &send(self(), {:backward, &1})) * (1 - 1 / (1 + Nx.exp(t)))]
    end)
  end

  defn grad_custom_hooked(t), do: grad(t, custom_hooked(t))

  defn named(x), do: hook(x * 2, :doubled)
  defn named_with_default(x), do: hook(x * 3, :tripled, &send(self(), {:default, &1}))

  defn printed(x), do: x |> Nx.exp() |> print_value() |> Nx.sum()
  defn printed_with_label(x), do: x |> Nx.add(1) |> print_value(label: "plus one") |> Nx.sum()

  defn tuple_hooked(x) do
    {a, b} = hook({x + 1, x * 2}, &send(self(), {:pair, &1}))
    a + b
  end

  defn map_hooked(x) do
    %{a: a, b: b} = hook(%{a: x - 1, b: Nx.iota({2})}, &send(self(), {:map, &1}))
    a + b
  end

  defn raising(x) do
    x
    |> Nx.exp()
    |> hook(fn _ -> raise ArgumentError, "hook failed on purpose" end)
    |> hook(&send(self(), {:after_failure, &1}))
  end

  defn cond_hooked(x) do
    if x > 0 do
      hook(x, &send(self(), {:positive, &1}))
    else
      hook(-x, &send(self(), {:negative, &1}))
    end
  end

  defn printed_graph(x) do
    y = if x > 0, do: Nx.sqrt(x), else: hook(x * 2, :negative)

    {acc} =
      while {acc = y}, i <- 1..3 do
        {acc + i}
      end

    print_expr(acc)
  end

  defn printed_vectorized(x), do: print_expr(Nx.exp(x) + 1)

  defp messages(tag), do: NxJax.TestMailbox.take(tag)

  @tag :seam
  test "a hook runs in the calling process with the concrete value; the result is unchanged" do
    assert exp_hooked(Nx.tensor(0.0)) == Nx.tensor(2.0)
    assert_received {:hooked, value}
    assert value == Nx.tensor(1.0)
    assert %Nx.BinaryBackend{} = value.data
    assert exp_hooked(Nx.tensor([0.0, 1.0])) == Nx.multiply(Nx.exp(Nx.tensor([0.0, 1.0])), 2)
    assert [value] = messages(:hooked)
    assert value == Nx.exp(Nx.tensor([0.0, 1.0]))
  end

  # the hooks arrive while the caller polls for its reply (reply_spin_us longer than the call)
  # as well as while it sleeps in receive (0)
  test "hooks run whether the caller polls for its reply or sleeps" do
    for spin <- [60_000_000, 0] do
      looped = Nx.Defn.jit(&loop_hooked/1, reply_spin_us: spin)
      assert looped.(Nx.tensor(10.0)) == Nx.tensor(16.0)
      assert messages(:iteration) == [Nx.tensor(11.0), Nx.tensor(13.0), Nx.tensor(16.0)]
    end
  end

  @tag :seam
  test "a hook inside a range while loop fires once per iteration, in order" do
    assert loop_hooked(Nx.tensor(10.0)) == Nx.tensor(16.0)
    assert messages(:iteration) == [Nx.tensor(11.0), Nx.tensor(13.0), Nx.tensor(16.0)]
  end

  @tag :seam
  test "only the taken branch of a cond fires" do
    assert cond_hooked(Nx.tensor(2.0)) == Nx.tensor(2.0)
    assert cond_hooked(Nx.tensor(-5.0)) == Nx.tensor(5.0)
    assert messages(:positive) == [Nx.tensor(2.0)]
    assert messages(:negative) == [Nx.tensor(5.0)]
  end

  test "a hook inside a grad'ed function fires once, with the forward value" do
    # d/dx 3 x^2 = 6x
    assert grad_hooked(Nx.tensor(2.0)) == Nx.tensor(12.0)
    assert messages(:forward) == [Nx.tensor(4.0)]

    {value, grad} = value_and_grad_hooked(Nx.tensor(0.0))
    assert {value, grad} == {Nx.tensor(0.0), Nx.tensor(1.0)}
    assert messages(:forward) == [Nx.tensor(0.0)]
  end

  test "a hooked function has the gradient of the function (central differences, f64)" do
    hooked = &Nx.Defn.Kernel.hook(&1, fn v -> send(self(), {:checked, v}) end)
    fun = fn x -> x |> Nx.sin() |> hooked.() |> Nx.multiply(x) |> Nx.sum() end
    grad_fun = fn x -> Nx.Defn.grad(x, fun) end
    NxJax.GradCheck.check_grads!(fun, grad_fun, Nx.tensor([0.3, 1.2, -2.0], type: {:f, 64}))
    assert messages(:checked) != []
  end

  test "a hook on grad(...) gets the gradient" do
    assert hooked_grad(Nx.tensor(0.0)) == Nx.tensor(1.0)
    assert messages(:gradient) == [Nx.tensor(1.0)]
  end

  test "under stop_grad the hook fires with the value and the gradient stays stopped" do
    assert grad_stop_hooked(Nx.tensor(3.0)) == Nx.tensor(6.0)
    assert messages(:stopped) == [Nx.exp(Nx.tensor(3.0))]
  end

  test "with custom_grad the forward hook gets the value and the backward hook the gradient" do
    # the softplus of the README at t = 100: autodiff gives NaN, the custom rule 1.0
    assert grad_custom_hooked(Nx.tensor(100.0)) == Nx.tensor(1.0)
    assert [forward] = messages(:forward)
    assert Nx.to_number(forward) == :infinity
    assert messages(:backward) == [Nx.tensor(1.0)]

    assert custom_hooked(Nx.tensor(0.0)) == Nx.log1p(Nx.tensor(1.0))
    assert messages(:forward) == [Nx.log1p(Nx.tensor(1.0))]
    assert messages(:backward) == []
  end

  @tag :seam
  test "a hook by name runs the function the jit's hooks: option gives it" do
    test = self()
    assert named(Nx.tensor(1.0)) == Nx.tensor(2.0)
    jitted = Nx.Defn.jit(&named/1, hooks: %{doubled: &send(test, {:named, &1})})
    assert jitted.(Nx.tensor(4.0)) == Nx.tensor(8.0)
    assert messages(:named) == [Nx.tensor(8.0)]

    assert named_with_default(Nx.tensor(1.0)) == Nx.tensor(3.0)
    assert messages(:default) == [Nx.tensor(3.0)]
    jitted = Nx.Defn.jit(&named_with_default/1, hooks: %{tripled: &send(test, {:override, &1})})
    assert jitted.(Nx.tensor(2.0)) == Nx.tensor(6.0)
    assert messages(:override) == [Nx.tensor(6.0)]
    assert messages(:default) == []
  end

  @tag :seam
  test "print_value prints the value when it is computed, with its label" do
    output = capture_io(fn -> assert printed(Nx.tensor([0.0, 0.0])) == Nx.tensor(2.0) end)
    assert output == "#Nx.Tensor<\n  f32[2]\n  [1.0, 1.0]\n>\n"

    output = capture_io(fn -> printed_with_label(Nx.tensor(1, type: {:s, 64})) end)
    assert output == "plus one: #Nx.Tensor<\n  s64\n  2\n>\n"
  end

  @tag :seam
  test "tuples and maps are hooked as one container" do
    assert tuple_hooked(Nx.tensor(2.0)) == Nx.tensor(7.0)
    assert messages(:pair) == [{Nx.tensor(3.0), Nx.tensor(4.0)}]

    assert map_hooked(Nx.tensor(1.0)) == Nx.tensor([0.0, 1.0])
    assert messages(:map) == [%{a: Nx.tensor(0.0), b: Nx.tensor([0, 1])}]
  end

  test "a vectorized tensor is hooked vectorized" do
    x = Nx.vectorize(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), :rows)
    assert exp_hooked(x) == Nx.multiply(Nx.exp(x), 2)
    assert [value] = messages(:hooked)
    assert value.vectorized_axes == [rows: 2]
    assert value == Nx.exp(x)
  end

  @tag :seam
  test "a hook that raises fails the call once the result arrives; the worker serves on" do
    assert_raise ArgumentError, "hook failed on purpose", fn -> raising(Nx.tensor(0.0)) end
    assert messages(:after_failure) == []
    assert exp_hooked(Nx.tensor(0.0)) == Nx.tensor(2.0)
    assert messages(:hooked) == [Nx.tensor(1.0)]
  end

  @tag :seam
  test "hooks of concurrent callers go to their own caller" do
    results =
      1..8
      |> Task.async_stream(
        fn i ->
          for _ <- 1..10 do
            x = Nx.tensor(i * 1.0)
            {exp_hooked(x), messages(:hooked)}
          end
        end,
        max_concurrency: 8,
        timeout: :infinity
      )
      |> Enum.map(fn {:ok, runs} -> runs end)

    for {runs, i} <- Enum.with_index(results, 1), {result, hooked} <- runs do
      expected = Nx.exp(Nx.tensor(i * 1.0))
      assert result == Nx.multiply(expected, 2)
      assert hooked == [expected]
    end
  end

  describe "hooks_in: :process" do
    defn named_hooks(x) do
      a = hook(Nx.exp(x), :first)
      b = hook(Nx.multiply(a, 2), :second)
      Nx.add(b, 1)
    end

    test "each hook runs in a process of its own, in order, with the caller in $callers" do
      parent = self()
      report = fn tag -> &send(parent, {tag, self(), Process.get(:"$callers"), &1}) end
      hooks = %{first: report.(:first), second: report.(:second)}
      fun = Nx.Defn.jit(&named_hooks/1, hooks: hooks, hooks_in: :process)
      assert fun.(Nx.tensor(0.0)) == Nx.tensor(3.0)
      assert_received {:first, first, [^parent | _], first_value}
      assert_received {:second, second, [^parent | _], second_value}
      assert first != parent and second != parent and first != second
      assert {first_value, second_value} == {Nx.tensor(1.0), Nx.tensor(2.0)}
    end

    # a call of named_hooks whose first hook never returns, with `opts`, on a worker of its
    # own (so that no other test's call queues ahead of it on a busy machine): it fails with
    # the Timeout error (returned) and the hook's process (its pid returned) is gone
    defp stopped_hook!(opts) do
      parent = self()
      worker = start_supervised!({NxJax.Worker, []})

      block = fn _ ->
        send(parent, {:blocked, self()})
        Process.sleep(:infinity)
      end

      # (compiled first, so that the deadline finds the worker done and only the hook running)
      assert Nx.Defn.jit_apply(&named_hooks/1, [0.0], server: worker) == Nx.tensor(3.0)
      os_pid = NxJax.Worker.os_pid(worker)

      error =
        assert_raise NxJax.WorkerError, fn ->
          opts = [hooks: %{first: block}, server: worker] ++ opts
          Nx.Defn.jit_apply(&named_hooks/1, [0.0], opts)
        end

      assert error.class == "Timeout"
      assert error.message =~ "hook 0 of this call was still running"
      assert_received {:blocked, hook_pid}
      refute Process.alive?(hook_pid)
      # (the worker had finished: nothing was killed, and the next call is served)
      assert NxJax.Worker.os_pid(worker) == os_pid
      assert Nx.Defn.jit_apply(&named_hooks/1, [0.0], server: worker) == Nx.tensor(3.0)
      {error, hook_pid}
    end

    test "a hook that never returns is stopped at the call's deadline; the worker serves on" do
      {error, _hook_pid} = stopped_hook!(hooks_in: :process, timeout: 1000)
      assert error.message =~ "timeout: 1000 ms"
    end

    test "a call with a :timeout of its own puts its hooks under it without hooks_in" do
      parent = self()
      {_error, hook_pid} = stopped_hook!(timeout: 1000)
      assert hook_pid != parent

      # hooks_in: :caller keeps them in the caller (Nx's evaluator) even then
      report = &send(parent, {:in, self(), &1})
      opts = [hooks: %{first: report}, timeout: 60_000, hooks_in: :caller]
      assert Nx.Defn.jit_apply(&named_hooks/1, [0.0], opts) == Nx.tensor(3.0)
      assert_received {:in, ^parent, _}

      # and :infinity is no deadline: the caller, as without a timeout
      opts = [hooks: %{first: report}, timeout: :infinity]
      assert Nx.Defn.jit_apply(&named_hooks/1, [0.0], opts) == Nx.tensor(3.0)
      assert_received {:in, ^parent, _}
    end

    test "a hook that raises fails the call with its error; the later hooks are skipped" do
      parent = self()
      raising = fn _ -> raise ArgumentError, "hook failed in its process" end
      hooks = %{first: raising, second: &send(parent, {:second, &1})}
      fun = Nx.Defn.jit(&named_hooks/1, hooks: hooks, hooks_in: :process)
      assert_raise ArgumentError, "hook failed in its process", fn -> fun.(Nx.tensor(0.0)) end
      refute_received {:second, _}
    end

    test "by default a hook runs in the caller (Nx's evaluator), and a bad value is refused" do
      parent = self()
      fun = Nx.Defn.jit(&named_hooks/1, hooks: %{first: &send(parent, {:in, self(), &1})})
      assert fun.(Nx.tensor(0.0)) == Nx.tensor(3.0)
      assert_received {:in, ^parent, _}

      assert_raise ArgumentError, ~r/hooks_in must be :caller .* got: :elsewhere/, fn ->
        Nx.Defn.jit(&named_hooks/1, hooks_in: :elsewhere).(Nx.tensor(0.0))
      end
    end
  end

  test "outside defn, hook calls its function at once" do
    assert Nx.Defn.Kernel.hook(Nx.tensor(1.0), &send(self(), {:eager, &1})) == Nx.tensor(1.0)
    assert messages(:eager) == [Nx.tensor(1.0)]
  end

  @tag :seam
  test "print_expr lists sub-graphs indented under their node, and hooks" do
    output = capture_io(fn -> printed_graph(Nx.tensor(4.0)) end)

    assert output =~
             """
               parameter a:0                                  f32
               b = greater a, 0.0                             u8
               c = cond b, a                                  {f32}
                 branches[0]:
                   parameter a:0  f32
                   b = sqrt a     f32
                   return b
                 branches[1]:
                   parameter a:0         f32
                   b = multiply a, 2.0   f32
                   c = hook b, index: 0  {f32}
                   d = elem c, index: 0  f32
                   return d
               d = elem c, index: 0                           f32
               e = range_loop d, count: 3, first: 1, step: 1  {f32}
                 body:
                   parameter a:0  f32
                   parameter b:1  s64
                   c = add a, b   f32
                   return c
               f = elem e, index: 0                           f32
             """
  end

  test "print_expr shows the vectorized sizes of vectorized nodes" do
    x = Nx.vectorize(Nx.tensor([1.0, 2.0]), :rows)
    output = capture_io(fn -> printed_vectorized(x) end)
    assert output =~ "b = exp a       vectorized[2] f32\n"
    assert output =~ "c = add b, 1.0  vectorized[2] f32\n"
  end
end
