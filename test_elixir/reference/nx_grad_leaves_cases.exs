# The defn functions of the gradient cases of integer leaves and empty containers, shared by
# test_elixir/grad_integer_leaves_test.exs (nx_jax's answers) and nx_grad_leaves_reference.exs
# (real Nx 0.7.2's). Written against Nx 0.7.2's public API only.
defmodule NxGradLeavesCases do
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

  # the key and the counter carried through branches and loops
  defn vg_key_if(p) do
    value_and_grad(p, fn p ->
      if Nx.sum(p.w) > 0, do: key_loss(p), else: Nx.sum(p.w)
    end)
  end

  defn vg_key_cond(p) do
    value_and_grad(p, fn p ->
      cond do
        Nx.sum(p.w) > 10 -> Nx.sum(p.w)
        Nx.sum(p.w) > 0 -> key_loss(p)
        true -> Nx.sum(p.w) * 2
      end
    end)
  end

  defn vg_key_while(p) do
    value_and_grad(p, fn p ->
      {_i, _key, acc, _w} =
        while {i = 0, key = p.key, acc = 0.0, w = p.w}, i < 2 do
          {u, key} = Nx.Random.uniform(key, shape: {2})
          {i + 1, key, acc + Nx.sum(w * u), w}
        end

      acc
    end)
  end

  defn vg_counter_while(p) do
    value_and_grad(p, fn p ->
      {count, w} =
        while {count = p.count, w = p.w}, count < 5 do
          {count + 1, w * 2}
        end

      Nx.sum(w) + count
    end)
  end

  defn vg_counter_if(p) do
    value_and_grad(p, fn p ->
      s = if p.count > 1, do: p.count * 2, else: p.count
      Nx.sum(p.w * s)
    end)
  end

  defn grad1(x), do: grad(fn x -> Nx.sin(x) * x end).(x)
  defn vg1(x), do: value_and_grad(fn x -> Nx.sin(x) * x end).(x)
end
