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

Code.require_file("nx_grad_leaves_cases.exs", __DIR__)

alias NxGradLeavesCases, as: R

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
  {"key through if", fn -> R.vg_key_if(key) end},
  {"key through cond", fn -> R.vg_key_cond(key) end},
  {"key through while", fn -> R.vg_key_while(key) end},
  {"s64 counter through while", fn -> R.vg_counter_while(counter) end},
  {"s64 counter through if", fn -> R.vg_counter_if(counter) end},
  {"grad/1 inside defn", fn -> R.grad1(Nx.tensor(1.0)) end},
  {"value_and_grad/1 inside defn", fn -> R.vg1(Nx.tensor(1.0)) end}
]

for {name, fun} <- cases do
  IO.puts("## #{name}")
  IO.inspect(fun.(), limit: :infinity)
end
