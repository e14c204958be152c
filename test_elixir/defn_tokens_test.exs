defmodule NxJax.DefnTokensTest do
  # create_token/0, hook_token/3,4 and attach_token/2: a token collects hooks on values the
  # result need not use; attaching it to a value makes computing that value fire them, in the
  # order they were added (the worker computes the hooked values first: :attach_token nodes).
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)

  import ExUnit.CaptureIO
  import Nx.Defn

  doctest Nx.Defn.Token

  defp tell(tag), do: &send(self(), {tag, &1})

  defn add_and_mult(a, b) do
    token = create_token()
    {token, _add} = hook_token(token, a + b, :add, &send(self(), {:add, &1}))
    {token, _mult} = hook_token(token, a * b, :mult, &send(self(), {:mult, &1}))
    attach_token(token, a - b)
  end

  defn named_only(a, b) do
    token = create_token()
    {token, _} = hook_token(token, b, :b)
    {token, _} = hook_token(token, a, :a)
    attach_token(token, {a, b})
  end

  defn unnamed(a) do
    {token, _} = hook_token(create_token(), a * 2, &send(self(), {:unnamed, &1}))
    attach_token(token, a)
  end

  defn before_own_hook(a) do
    {token, _} = hook_token(create_token(), a + 1, &send(self(), {:order, {:token, &1}}))
    attach_token(token, hook(a * 3, &send(self(), {:order, {:own, &1}})))
  end

  defn container_attached(a) do
    {token, _} = hook_token(create_token(), {a, a * 2}, &send(self(), {:pair, &1}))
    attach_token(token, %{x: a + 1, y: a - 1})
  end

  defn never_attached(a) do
    {_token, _} = hook_token(create_token(), a, &send(self(), {:lost, &1}))
    a + 1
  end

  defn returned_value_is_not_hooked(a) do
    {_token, value} = hook_token(create_token(), a * 5, &send(self(), {:lost, &1}))
    value
  end

  defn in_loop(x) do
    {x, _i} =
      while {x, i = 0}, i < 3 do
        {token, _} = hook_token(create_token(), i * 10, &send(self(), {:step, &1}))
        attach_token(token, {x + i, i + 1})
      end

    x
  end

  defn in_branches(x) do
    if x > 0 do
      {token, _} = hook_token(create_token(), x * 2, &send(self(), {:positive, &1}))
      attach_token(token, x)
    else
      {token, _} = hook_token(create_token(), x * 3, &send(self(), {:negative, &1}))
      attach_token(token, -x)
    end
  end

  defn grad_with_token(x) do
    grad(x, fn x ->
      {token, _} = hook_token(create_token(), Nx.exp(x), &send(self(), {:forward, &1}))
      attach_token(token, x * x)
    end)
  end

  defn vectorized_token(x) do
    {token, _} = hook_token(create_token(), x * 2, &send(self(), {:vectorized, &1}))
    attach_token(token, x + 1)
  end

  defn print_sum(x), do: x |> print_value(&Nx.sum/1) |> Nx.multiply(2)
  defn print_sum_labelled(x), do: x |> print_value(&Nx.sum/1, label: "sum") |> Nx.negate()

  defp messages(tag), do: NxJax.TestMailbox.take(tag)

  @tag :seam
  test "hooks added to a token fire in order though the result uses none of their values" do
    assert add_and_mult(Nx.tensor(1), Nx.tensor(2)) == Nx.tensor(-1)
    {:messages, messages} = Process.info(self(), :messages)
    assert messages == [add: Nx.tensor(3), mult: Nx.tensor(2)]
    assert messages(:add) == [Nx.tensor(3)] and messages(:mult) == [Nx.tensor(2)]
  end

  @tag :seam
  test "named token hooks take their functions from the jit's hooks: option" do
    assert named_only(1, 2) == {Nx.tensor(1), Nx.tensor(2)}
    refute_received _

    fun = Nx.Defn.jit(&named_only/2, hooks: %{a: tell(:a), b: tell(:b)})
    assert fun.(1, 2) == {Nx.tensor(1), Nx.tensor(2)}
    {:messages, messages} = Process.info(self(), :messages)
    assert messages == [b: Nx.tensor(2), a: Nx.tensor(1)]
    assert messages(:b) == [Nx.tensor(2)] and messages(:a) == [Nx.tensor(1)]

    fun = Nx.Defn.jit(&named_only/2, hooks: %{a: tell(:only_a)})
    fun.(1, 2)
    assert messages(:only_a) == [Nx.tensor(1)]
    refute_received _
  end

  @tag :seam
  test "hook_token/4's default function runs unless hooks: overrides its name" do
    add_and_mult(3, 4)
    assert messages(:add) == [Nx.tensor(7)] and messages(:mult) == [Nx.tensor(12)]

    Nx.Defn.jit(&add_and_mult/2, hooks: %{add: tell(:custom_add)}).(3, 4)
    assert messages(:custom_add) == [Nx.tensor(7)]
    assert messages(:add) == []
    assert messages(:mult) == [Nx.tensor(12)]
  end

  @tag :seam
  test "hook_token/3 with a function is unnamed: hooks: cannot override it" do
    assert unnamed(Nx.tensor(1.5)) == Nx.tensor(1.5)
    assert messages(:unnamed) == [Nx.tensor(3.0)]

    Nx.Defn.jit(&unnamed/1, hooks: %{nil => tell(:override)}).(Nx.tensor(1.5))
    assert messages(:unnamed) == [Nx.tensor(3.0)]
    assert messages(:override) == []
  end

  @tag :seam
  test "the token's hooks fire before the hooks of the value it is attached to" do
    assert before_own_hook(2) == Nx.tensor(6)
    assert messages(:order) == [{:token, Nx.tensor(3)}, {:own, Nx.tensor(6)}]
  end

  @tag :seam
  test "a token attached to a container fires each hook once, with the hooked container" do
    assert container_attached(Nx.tensor(4)) == %{x: Nx.tensor(5), y: Nx.tensor(3)}
    assert messages(:pair) == [{Nx.tensor(4), Nx.tensor(8)}]
  end

  @tag :seam
  test "a token never attached fires nothing, and the value hook_token returns is not hooked" do
    assert never_attached(1) == Nx.tensor(2)
    assert returned_value_is_not_hooked(1) == Nx.tensor(5)
    refute_received _
  end

  @tag :seam
  test "a token attached inside a while body fires once per iteration" do
    assert in_loop(100) == Nx.tensor(103)
    assert messages(:step) == [Nx.tensor(0), Nx.tensor(10), Nx.tensor(20)]
  end

  @tag :seam
  test "a token attached inside an if branch fires only when that branch is taken" do
    assert in_branches(Nx.tensor(2)) == Nx.tensor(2)
    assert messages(:positive) == [Nx.tensor(4)] and messages(:negative) == []

    assert in_branches(Nx.tensor(-2)) == Nx.tensor(2)
    assert messages(:negative) == [Nx.tensor(-6)] and messages(:positive) == []
  end

  test "under grad a token's hooks fire once with the forward value and take no gradient" do
    assert grad_with_token(Nx.tensor(3.0)) == Nx.tensor(6.0)
    assert [value] = messages(:forward)
    assert value == Nx.exp(Nx.tensor(3.0))
  end

  test "a token over vectorized values hooks them and keeps the result vectorized" do
    x = Nx.vectorize(Nx.tensor([1, 2]), :rows)
    assert vectorized_token(x) == Nx.vectorize(Nx.tensor([2, 3]), :rows)
    assert [hooked] = messages(:vectorized)
    assert Nx.devectorize(hooked, keep_names: false) == Nx.tensor([2, 4])
  end

  @tag :seam
  test "print_value/2,3 with a function print its result on the value and return the value" do
    output = capture_io(fn -> assert print_sum(Nx.tensor([1, 2, 3])) == Nx.tensor([2, 4, 6]) end)
    assert output == "#Nx.Tensor<\n  s64\n  6\n>\n"

    output = capture_io(fn -> print_sum_labelled(Nx.tensor([1, 2])) end)
    assert output == "sum: #Nx.Tensor<\n  s64\n  3\n>\n"
  end

  test "a token inspects as the names of its hooks, newest first" do
    token = Nx.Defn.Kernel.create_token()
    assert inspect(token) == "#Nx.Defn.Token<[]>"
    {token, _} = Nx.Defn.Kernel.hook_token(token, Nx.tensor(1), :first)
    {token, _} = Nx.Defn.Kernel.hook_token(token, Nx.tensor(2), :second, tell(:second))
    assert inspect(token) == "#Nx.Defn.Token<[:second, :first]>"
    assert [%{name: :second, expr: second}, %{name: :first, callback: nil}] = token.hooks
    assert second == Nx.tensor(2)
  end

  test "bad arguments raise FunctionClauseError, as Nx's guards do" do
    token = Nx.Defn.Kernel.create_token()

    # (called through apply/3: written as direct calls, arguments that no clause accepts are
    # what a type checker, such as Elixir 1.18's, warns about at compile time)
    calls = [
      hook_token: [:token, 1, :a],
      hook_token: [token, 1, "a"],
      hook_token: [token, 1, :a, :b],
      hook_token: [token, 1, fn -> 1 end],
      attach_token: [%{hooks: []}, 1],
      print_value: [1, :label]
    ]

    for {fun, args} <- calls do
      assert_raise FunctionClauseError, fn -> apply(Nx.Defn.Kernel, fun, args) end
    end
  end

  @tag :seam
  test "print_expr shows the attached token as an :attach_token node over the hooked values" do
    output =
      capture_io(fn ->
        Nx.Defn.jit(fn a ->
          {token, _} = Nx.Defn.Kernel.hook_token(Nx.Defn.Kernel.create_token(), a, :a)
          Nx.Defn.Kernel.print_expr(Nx.Defn.Kernel.attach_token(token, Nx.exp(a)))
        end).(Nx.tensor(1.0))
      end)

    assert output =~ "attach_token"
  end
end
