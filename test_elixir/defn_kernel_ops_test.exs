defmodule NxJax.DefnKernelOpsTest do
  # Inside defn, max/min/rem/div, and/or/not and the bitwise operators are element-wise tensor
  # ops, as in Nx 0.7.2 (they were Kernel's: max(x, 0) returned x unchanged). Expected values
  # are what real Nx 0.7.2 answers for the same calls.
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)

  import Nx.Defn

  defn relu(x), do: max(x, 0)
  defn clamp01(x), do: min(max(x, 0.0), 1.0)
  defn logic(a, b), do: {a and b, a or b, not a}
  defn integer_division(a), do: {rem(a, 2), div(a, 2)}
  defn bits(a, b), do: {a &&& b, a ||| b, a <<< 1, a >>> 1, ~~~a}
  defn both_positive(a, b), do: a > 0 and b > 0
  defn folded_numbers(x), do: x + max(2, 5) + rem(7, 4) + div(9, 2)
  defn booleans(x), do: {true and x, not false}

  test "max/2 and min/2 are element-wise on tensors, and their gradients follow" do
    assert relu(Nx.tensor([-1.0, 2.0])) == Nx.tensor([0.0, 2.0])
    assert clamp01(Nx.tensor([-1.0, 0.5, 2.0])) == Nx.tensor([0.0, 0.5, 1.0])
    assert Nx.Defn.grad(Nx.tensor([-1.0, 2.0]), &Nx.sum(relu(&1))) == Nx.tensor([0.0, 1.0])
  end

  @tag :seam
  test "and, or, not give u8 tensors; both sides are evaluated" do
    {conj, disj, neg} = logic(Nx.tensor([0, 1, 5]), Nx.tensor([1, 0, 3]))
    assert conj == Nx.tensor([0, 0, 1], type: :u8)
    assert disj == Nx.tensor([1, 1, 1], type: :u8)
    assert neg == Nx.tensor([1, 0, 0], type: :u8)

    assert both_positive(Nx.tensor([1.0, -1.0, 2.0]), Nx.tensor([3.0, 3.0, -3.0])) ==
             Nx.tensor([1, 0, 0], type: :u8)

    {with_true, not_false} = booleans(Nx.tensor([0, 2]))
    assert with_true == Nx.tensor([0, 1], type: :u8)
    assert not_false == Nx.tensor(1, type: :u8)
  end

  @tag :seam
  test "rem/2 and div/2 are Nx.remainder and Nx.quotient (truncated towards zero)" do
    {r, q} = integer_division(Nx.tensor([0, 1, 5, -5]))
    assert r == Nx.tensor([0, 1, 1, -1])
    assert q == Nx.tensor([0, 0, 2, -2])
  end

  @tag :seam
  test "the bitwise operators are Nx's bitwise ops" do
    {band, bor, shl, shr, bnot} = bits(Nx.tensor([12, -8]), Nx.tensor([10, 3]))
    assert band == Nx.tensor([8, 0])
    assert bor == Nx.tensor([14, -5])
    assert shl == Nx.tensor([24, -16])
    assert shr == Nx.tensor([6, -4])
    assert bnot == Nx.tensor([-13, 7])
  end

  @tag :seam
  test "two numbers still fold with Kernel's functions at trace time" do
    assert folded_numbers(Nx.tensor(1)) == Nx.tensor(1 + 5 + 3 + 4)
    assert Nx.Defn.Kernel.max(7, 2) == 7 and Nx.Defn.Kernel.div(7, 2) == 3
  end

  defn compare_constants(opts \\ []) do
    l = opts[:l]
    r = opts[:r]
    {l < r, l <= r, l > r, l >= r, l == r, l != r, l and r, l or r, not l}
  end

  defn pick_statically(x, opts \\ []) do
    # the branches differ in shape: only one is traced, as Nx eliminates the other
    if opts[:n] > 2, do: Nx.sum(x), else: x
  end

  # Nx 0.7.2's defn_test "supports booleans in some operations": true/false count as 1/0 and
  # two numbers compare into a u8 scalar tensor (they were Kernel's booleans here)
  @tag :seam
  test "comparisons of numbers and booleans give u8 tensors" do
    for l <- [true, false, 1, 0, 2.5], r <- [true, false, 1, 0] do
      ln = if l in [true, false], do: if(l, do: 1, else: 0), else: l
      rn = if r in [true, false], do: if(r, do: 1, else: 0), else: r
      bit = fn b -> Nx.tensor(if(b, do: 1, else: 0), type: :u8) end

      assert compare_constants(l: l, r: r) ==
               {bit.(ln < rn), bit.(ln <= rn), bit.(ln > rn), bit.(ln >= rn), bit.(ln == rn),
                bit.(ln != rn), bit.(ln != 0 and rn != 0), bit.(ln != 0 or rn != 0),
                bit.(ln == 0)}
    end

    assert pick_statically(Nx.tensor([1, 2]), n: 3) == Nx.tensor(3)
    assert pick_statically(Nx.tensor([1, 2]), n: 1) == Nx.tensor([1, 2])
  end

  defmodule GuardUse do
    import Kernel, except: [and: 2, or: 2, not: 1]
    import Nx.Defn.Kernel, only: [and: 2, or: 2, not: 1]

    def kind(a, b) when is_integer(a) and is_integer(b), do: :integers
    def kind(a, _b) when not is_number(a) or a < 0, do: :other
    def kind(_a, _b), do: :numbers
  end

  test "in a guard, and/or/not are Kernel's" do
    assert GuardUse.kind(1, 2) == :integers
    assert GuardUse.kind(:x, 2) == :other
    assert GuardUse.kind(1.5, 2) == :numbers
  end

  test "a non-scalar value is differentiated with a seed of ones (as its sum), as in Nx" do
    square = &Nx.multiply(&1, &1)
    assert Nx.Defn.grad(Nx.tensor([1.0, 2.0]), square) == Nx.tensor([2.0, 4.0])

    assert Nx.Defn.value_and_grad(Nx.tensor([1.0, 2.0]), square) ==
             {Nx.tensor([1.0, 4.0]), Nx.tensor([2.0, 4.0])}
  end

  # the values real Nx 0.7.2 gives for the same calls (grad refused integer inputs before)
  test "grad with respect to integer tensors is computed as for floats, in f32" do
    assert Nx.Defn.grad(Nx.tensor(3), &Nx.multiply(&1, &1)) == Nx.tensor(6.0)
    assert Nx.Defn.grad(Nx.tensor(3, type: :s8), &Nx.multiply(&1, 2.5)) == Nx.tensor(2.5)
    assert Nx.Defn.grad(Nx.tensor(2, type: :u8), &Nx.pow(&1, 2)) == Nx.tensor(4.0)

    assert Nx.Defn.grad(Nx.tensor([1, 2]), &Nx.sum(Nx.sin(&1))) ==
             Nx.tensor([0.5403022766113281, -0.416146844625473])

    # the value is computed from the integer input as given
    assert Nx.Defn.value_and_grad(Nx.tensor(3), &Nx.multiply(&1, &1)) ==
             {Nx.tensor(9), Nx.tensor(6.0)}

    assert Nx.Defn.grad({Nx.tensor(2), Nx.tensor(3.0)}, fn {a, b} -> Nx.multiply(a, b) end) ==
             {Nx.tensor(3.0), Nx.tensor(2.0)}
  end

  describe "use Nx.Defn.Kernel" do
    # as Nx's kernel_test.exs does around `doctest Nx.Defn.Kernel`
    use Nx.Defn.Kernel

    test "the caller's operators and Kernel are Nx.Defn.Kernel's" do
      assert max(Nx.tensor([1, 5]), 3) == Nx.tensor([3, 5])
      assert Kernel.+(Nx.tensor([1, 2]), 1) == Nx.tensor([2, 3])
      assert 1 + 2 * 3 == 7
      assert (Nx.tensor([0, 2]) and 1) == Nx.tensor([0, 1], type: :u8)
    end
  end

  defn grad_clip_lower(t, lim), do: grad(lim, &Nx.sum(Nx.clip(t, &1, 10)))
  defn grad_clip_upper(t, lim), do: grad(lim, &Nx.sum(Nx.clip(t, -10, &1)))

  # Nx 0.7.2's grad_test values; the worker refused these ("select cases must have the same
  # shapes", lax.clamp's gradient with respect to a scalar bound)
  test "grad of clip with respect to its limits" do
    assert grad_clip_lower(Nx.iota({5}), 2.5) == Nx.tensor(3.0)
    assert grad_clip_upper(Nx.iota({5}), 2.5) == Nx.tensor(2.0)
  end

  defn grad_sum_abs(t), do: grad(t, &Nx.sum(Nx.abs(&1)))
  defn grad_sum_exp_reverse(t), do: grad(t, &Nx.sum(Nx.exp(Nx.reverse(&1))))

  # the worker refused a complex y ("must be a floating scalar"); these are real Nx 0.7.2's
  # answers, printed the same
  test "gradients of complex functions, as Nx 0.7.2" do
    z = Nx.tensor([Complex.new(0.0, 0.0), Complex.new(0.0, 1.0), Complex.new(2.0, 0.0)])

    assert inspect(grad_sum_abs(z)) ==
             "#Nx.Tensor<\n  c64[3]\n  [0.0-0.0i, 0.0-1.0i, 1.0-0.0i]\n>"

    w = Nx.tensor([Complex.new(1.0, 0.0), Complex.new(0.0, -2.0), Complex.new(3.0, 0.0)])

    assert inspect(grad_sum_exp_reverse(w)) ==
             "#Nx.Tensor<\n  c64[3]\n  [2.7182817459106445+0.0i, -0.416146844625473-0.9092974066734314i, 20.08553695678711+0.0i]\n>"

    assert Nx.Defn.value_and_grad(
             Nx.tensor([Complex.new(1.0, 1.0)]),
             &Nx.sum(Nx.multiply(&1, &1))
           ) ==
             {Nx.tensor(Complex.new(0.0, 2.0)), Nx.tensor([Complex.new(2.0, 2.0)])}
  end

  defn sum_over_range(t) do
    {acc, _} =
      while {acc = 0.0, t}, i <- 1..3 do
        {acc + i * Nx.sum(t[0..1]), t}
      end

    acc
  end

  @tag :seam
  test "`..` builds ranges as Kernel's, inside and outside defn (Nx.Defn.Kernel.\"..\"/2)" do
    assert Nx.Defn.Kernel.".."(1, 3) == 1..3
    assert Nx.Defn.Kernel."..//"(1, 5, 2) == 1..5//2
    assert sum_over_range(Nx.tensor([1.0, 2.0, 4.0])) == Nx.tensor(18.0)
  end

  # as Nx 0.7.2: `if`/`while` trace tensors, so outside defn they raise instead of running
  test "if and while raise outside defn" do
    assert_raise RuntimeError,
                 "cannot invoke Nx.Defn.Kernel.if/2 because you are not inside a defn",
                 fn ->
                   Code.eval_quoted(
                     quote do
                       require Nx.Defn.Kernel
                       Nx.Defn.Kernel.if(1, do: 0)
                     end
                   )
                 end

    assert_raise RuntimeError, ~r"Nx.Defn.Kernel.while/3 because you are not inside a defn", fn ->
      Code.eval_quoted(
        quote do
          require Nx.Defn.Kernel
          Nx.Defn.Kernel.while(x = 0, x < 3, do: x + 1)
        end
      )
    end
  end

  test "a hook given only a function gets a name of its own (hook_ and an integer)" do
    {token, _expr} =
      Nx.Defn.Kernel.hook_token(Nx.Defn.Kernel.create_token(), 1, &Function.identity/1)

    assert [%{name: name}] = token.hooks
    assert "hook_" <> digits = Atom.to_string(name)
    assert {_, ""} = Integer.parse(digits)
  end
end
