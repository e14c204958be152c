# Prints what REAL Nx 0.7.2 (Nx.BinaryBackend, Nx.Defn.Evaluator) returns for the gradient
# cases of test_elixir/grad_integer_leaves_test.exs: containers with integer leaves (PRNG
# keys, counters, masks), integer scalars, empty containers, and grad/1 and
# value_and_grad/1 inside defn. The test holds these values literally.
#
# This script is not run by our test suite. To rerun it, build real Nx 0.7.2
# (bash /work/shared/reference/build-real-nx.sh /tmp/realnx) and run, from there:
#
#     cd /tmp/realnx/nx-0.7.2/nx && mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_grad_leaves_reference.exs

unless Application.spec(:nx, :vsn) == ~c"0.7.2" do
  raise "run this against real Nx 0.7.2"
end

defmodule GradLeavesReference do
  import Nx.Defn

  defn key_loss(p) do
    {u, _} = Nx.Random.uniform(p.key, shape: {2})
    Nx.sum(p.w * u)
  end

  defn vg_key(p), do: value_and_grad(p, &key_loss/1)
  defn g_key(p), do: grad(p, &key_loss/1)
  defn vg_empty(x), do: value_and_grad(%{}, fn _ -> Nx.sum(x) end)
  defn g_empty(x), do: grad(%{}, fn _ -> Nx.sum(x) end)
  defn vg_counter(p), do: value_and_grad(p, fn p -> Nx.sum(p.w * p.count) end)
  defn vg_counter_cmp(p), do: value_and_grad(p, fn p -> Nx.sum(p.w * (p.count > 1)) end)
  defn vg_mask(p), do: value_and_grad(p, fn p -> Nx.sum(p.w) + Nx.sum(p.m) end)
  defn vg_square(x), do: value_and_grad(x, fn x -> x * x end)

  defn vg_bits(x),
    do: value_and_grad(x, fn x -> Nx.as_type(Nx.bitwise_and(x, 3), :f32) * 2.0 end)

  defn vg_nested(p) do
    value_and_grad(p, fn p ->
      Nx.sum(p.layer.w * Nx.as_type(p.layer.step, :f32)) + Nx.sum(elem(p.t, 1))
    end)
  end

  defn vg_tuple(t),
    do: value_and_grad(t, fn {i, f} -> Nx.sum(f * Nx.as_type(Nx.remainder(i, 2), :f32)) end)

  defn grad1(x), do: grad(fn x -> Nx.sin(x) * x end).(x)
  defn vg1(x), do: value_and_grad(fn x -> Nx.sin(x) * x end).(x)
end

alias GradLeavesReference, as: R

key = %{key: Nx.Random.key(7), w: Nx.tensor([1.0, 2.0])}
counter = %{w: Nx.tensor([1.0, 2.0]), count: Nx.tensor(3)}
mask = %{w: Nx.tensor([1.0, 2.0]), m: Nx.tensor([1, 0, 1], type: :u8)}

nested = %{
  layer: %{w: Nx.tensor([1.0, 2.0]), step: Nx.tensor(4)},
  t: {Nx.tensor(1, type: :u32), Nx.tensor([0.5])}
}

cases = [
  {"value_and_grad key inside defn", fn -> R.vg_key(key) end},
  {"grad key inside defn", fn -> R.g_key(key) end},
  {"value_and_grad key outside defn", fn -> Nx.Defn.value_and_grad(key, &R.key_loss/1) end},
  {"grad key outside defn", fn -> Nx.Defn.grad(key, &R.key_loss/1) end},
  {"uniform of the key", fn -> elem(Nx.Random.uniform(key.key, shape: {2}), 0) end},
  {"value_and_grad %{} inside defn", fn -> R.vg_empty(Nx.tensor([1.0, 2.0])) end},
  {"grad %{} inside defn", fn -> R.g_empty(Nx.tensor([1.0, 2.0])) end},
  {"value_and_grad %{} outside defn",
   fn -> Nx.Defn.value_and_grad(%{}, fn _ -> Nx.sum(Nx.tensor([1.0, 2.0])) end) end},
  {"s64 counter in arithmetic", fn -> R.vg_counter(counter) end},
  {"s64 counter in a comparison", fn -> R.vg_counter_cmp(counter) end},
  {"u8 mask", fn -> R.vg_mask(mask) end},
  {"s64 scalar x * x", fn -> R.vg_square(3) end},
  {"u8 scalar x * x", fn -> R.vg_square(Nx.tensor(3, type: :u8)) end},
  {"s64 scalar through bitwise_and", fn -> R.vg_bits(Nx.tensor(7)) end},
  {"nested map with integer leaves", fn -> R.vg_nested(nested) end},
  {"tuple {s32, f32}",
   fn -> R.vg_tuple({Nx.tensor([1, 2], type: :s32), Nx.tensor([3.0, 4.0])}) end},
  {"unused s64 leaf (outside defn)",
   fn -> Nx.Defn.grad(%{a: Nx.tensor(2), b: Nx.tensor([1.0])}, fn p -> Nx.sum(p.b) end) end},
  {"grad/1 inside defn", fn -> R.grad1(Nx.tensor(1.0)) end},
  {"value_and_grad/1 inside defn", fn -> R.vg1(Nx.tensor(1.0)) end}
]

for {name, fun} <- cases do
  IO.puts("## #{name}")
  IO.inspect(fun.(), limit: :infinity)
end
