Code.require_file("reference/nx_grad_leaves_cases.exs", __DIR__)

defmodule NxJax.GradIntegerLeavesTest do
  # Differentiating a container that holds integer leaves beside float parameters (a PRNG
  # key for dropout, step counters, masks), and containers with no tensors at all. The
  # expected values are real Nx 0.7.2's, printed by
  # test_elixir/reference/nx_grad_leaves_reference.exs (see its header for how to run it).
  use ExUnit.Case, async: true

  import Nx.Defn
  # the defn functions of the cases, shared with the generator
  import NxGradLeavesCases

  # a training step with dropout: the key is split and used, and the gradient of w is that
  # of the mask-scaled loss
  defn dropout_step(p, x) do
    value_and_grad(p, fn p ->
      {k1, _k2} = p.key |> Nx.Random.split() |> then(&{&1[0], &1[1]})
      {u, _} = Nx.Random.uniform(k1, shape: Nx.shape(x))
      keep = u > 0.5
      Nx.sum(Nx.select(keep, x * p.w, 0.0) * 2.0)
    end)
  end

  # Nx.Random.uniform(Nx.Random.key(7), shape: {2}) under real Nx 0.7.2
  @u Nx.tensor([0.514767050743103, 0.07849109172821045])

  describe "a PRNG key in the differentiated container" do
    setup do
      %{p: %{key: Nx.Random.key(7), w: Nx.tensor([1.0, 2.0])}}
    end

    test "stays u32 inside the function and gets f32 zeros (value_and_grad in defn)", %{p: p} do
      assert vg_key(p) ==
               {Nx.tensor(0.6717492341995239), %{key: Nx.tensor([0.0, 0.0]), w: @u}}
    end

    test "grad/2 inside defn", %{p: p} do
      assert g_key(p) == %{key: Nx.tensor([0.0, 0.0]), w: @u}
    end

    test "value_and_grad/2 and grad/2 outside defn", %{p: p} do
      assert Nx.Defn.value_and_grad(p, &key_loss/1) ==
               {Nx.tensor(0.6717492341995239), %{key: Nx.tensor([0.0, 0.0]), w: @u}}

      assert Nx.Defn.grad(p, &key_loss/1) == %{key: Nx.tensor([0.0, 0.0]), w: @u}
    end

    test "the gradient of w is the uniform draw (the loss is linear in w)", %{p: p} do
      {u, _} = Nx.Random.uniform(p.key, shape: {2})
      assert u == @u
      # central finite differences of the linear loss, in f32
      h = 0.5

      fd =
        for i <- 0..1 do
          e = Nx.put_slice(Nx.tensor([0.0, 0.0]), [i], Nx.tensor([h]))
          up = key_loss(%{p | w: Nx.add(p.w, e)}) |> Nx.to_number()
          down = key_loss(%{p | w: Nx.subtract(p.w, e)}) |> Nx.to_number()
          (up - down) / (2 * h)
        end

      %{w: gw} = g_key(p)
      assert_in_delta Enum.at(fd, 0), Nx.to_number(gw[0]), 1.0e-5
      assert_in_delta Enum.at(fd, 1), Nx.to_number(gw[1]), 1.0e-5
    end

    test "a dropout step runs: split key, mask from a comparison" do
      p = %{key: Nx.Random.key(42), w: Nx.tensor([1.0, 2.0, 3.0, 4.0])}
      x = Nx.tensor([1.0, 1.0, 1.0, 1.0])
      {loss, %{key: gkey, w: gw}} = dropout_step(p, x)
      assert gkey == Nx.tensor([0.0, 0.0])
      # the gradient of w is 2 where the element is kept, 0 where it is dropped
      assert Enum.all?(Nx.to_flat_list(gw), &(&1 in [0.0, 2.0]))
      assert Nx.to_number(loss) == Nx.to_number(Nx.sum(Nx.multiply(gw, p.w)))
    end
  end

  describe "integer leaves carried through branches and loops" do
    setup do
      %{
        key: %{key: Nx.Random.key(7), w: Nx.tensor([1.0, 2.0])},
        counter: %{w: Nx.tensor([1.0, 2.0]), count: Nx.tensor(3)}
      }
    end

    test "a PRNG key used inside if, cond and while stays u32 and gets f32 zeros", ctx do
      expected = {Nx.tensor(0.6717492341995239), %{key: Nx.tensor([0.0, 0.0]), w: @u}}
      assert vg_key_if(ctx.key) == expected
      assert vg_key_cond(ctx.key) == expected

      # two draws, the key split on each
      assert vg_key_while(ctx.key) ==
               {Nx.tensor(1.8419020175933838),
                %{
                  key: Nx.tensor([0.0, 0.0]),
                  w: Nx.tensor([1.3160607814788818, 0.262920618057251])
                }}
    end

    test "an s64 counter the loop adds to gets the f32 gradient", ctx do
      assert vg_counter_while(ctx.counter) ==
               {Nx.tensor(17.0), %{count: Nx.tensor(1.0), w: Nx.tensor([4.0, 4.0])}}
    end

    test "an s64 counter through if: the derivative, where real Nx doubles w's", ctx do
      # loss = sum(w * 2 * count) with count = 3: d/dw = 6, d/dcount = 2 * sum(w) = 6. Real
      # Nx 0.7.2 answers w: [12.0, 12.0] (docs/COMPATIBILITY.md)
      assert vg_counter_if(ctx.counter) ==
               {Nx.tensor(18.0), %{count: Nx.tensor(6.0), w: Nx.tensor([6.0, 6.0])}}
    end
  end

  describe "containers without tensors (as Nx 0.7.2)" do
    test "value_and_grad(%{}, fun) inside defn gives the value and %{}" do
      assert vg_empty(Nx.tensor([1.0, 2.0])) == {Nx.tensor(3.0), %{}}
      assert g_empty(Nx.tensor([1.0, 2.0])) == %{}
    end

    test "value_and_grad(%{}, fun) outside defn" do
      assert Nx.Defn.value_and_grad(%{}, fn _ -> Nx.sum(Nx.tensor([1.0, 2.0])) end) ==
               {Nx.tensor(3.0), %{}}
    end
  end

  describe "integer leaves that the gradient reaches (as Nx 0.7.2: a floating gradient)" do
    test "an s64 counter in arithmetic gets the f32 gradient; in a comparison zero" do
      p = %{w: Nx.tensor([1.0, 2.0]), count: Nx.tensor(3)}

      assert vg_counter(p) ==
               {Nx.tensor(9.0), %{count: Nx.tensor(3.0), w: Nx.tensor([3.0, 3.0])}}

      assert vg_counter_cmp(p) ==
               {Nx.tensor(3.0), %{count: Nx.tensor(0.0), w: Nx.tensor([1.0, 1.0])}}
    end

    test "a u8 mask summed into the loss gets f32 ones" do
      p = %{w: Nx.tensor([1.0, 2.0]), m: Nx.tensor([1, 0, 1], type: :u8)}

      assert vg_mask(p) ==
               {Nx.tensor(5.0), %{m: Nx.tensor([1.0, 1.0, 1.0]), w: Nx.tensor([1.0, 1.0])}}
    end

    test "an integer scalar x: the value keeps x's type, the gradient is f32" do
      assert vg_square(3) == {Nx.tensor(9), Nx.tensor(6.0)}

      assert vg_square(Nx.tensor(3, type: :u8)) ==
               {Nx.tensor(9, type: :u8), Nx.tensor(6.0)}

      # through a bitwise op the gradient does not reach it: f32 zero
      assert vg_bits(Nx.tensor(7)) == {Nx.tensor(6.0), Nx.tensor(0.0)}
    end

    test "nested containers and a tuple mixing integers and floats" do
      p = %{
        layer: %{w: Nx.tensor([1.0, 2.0]), step: Nx.tensor(4)},
        t: {Nx.tensor(1, type: :u32), Nx.tensor([0.5])}
      }

      assert vg_nested(p) ==
               {Nx.tensor(12.5),
                %{
                  layer: %{step: Nx.tensor(3.0), w: Nx.tensor([4.0, 4.0])},
                  t: {Nx.tensor(0.0), Nx.tensor([1.0])}
                }}

      assert vg_tuple({Nx.tensor([1, 2], type: :s32), Nx.tensor([3.0, 4.0])}) ==
               {Nx.tensor(3.0), {Nx.tensor([3.0, 4.0]), Nx.tensor([1.0, 0.0])}}
    end

    test "an integer leaf the function does not use gets an f32 zero (outside defn)" do
      assert Nx.Defn.grad(%{a: Nx.tensor(2), b: Nx.tensor([1.0])}, fn p -> Nx.sum(p.b) end) ==
               %{a: Nx.tensor(0.0), b: Nx.tensor([1.0])}
    end
  end
end
