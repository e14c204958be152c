# NxJax.Autodiff's functions under whichever Nx this build has, timed: the clean room
# (`mix run bench/toolbox_front_ends.exs`, where JAX differentiates the graph's nodes) or real
# Nx 0.7.2 with NxJax as its compiler (`NX_JAX_NX=_build/real-nx-src mix run
# bench/toolbox_front_ends.exs`, where real Nx writes the derivative before our compiler sees
# it). Each row: the first call (trace, encode, compile on the worker, run) and the p50 of
# later calls, in interleaved rounds, next to the worker's ping. The code is written in the
# forms both front ends take (docs/DIFFERENTIATION.md, "Under real Nx"). Nothing asserts a
# timing; docs/DIFFERENTIATION.md quotes one run.
defmodule ToolboxBench do
  import Nx.Defn
  import NxJax.Autodiff

  defn newton_sqrt(a) do
    custom_root(
      fn x -> x * x - a end,
      Nx.broadcast(1.0, a),
      fn _f, x0 ->
        {x, _a, _i} =
          while {x = x0, a, i = 0}, i < 100 and Nx.any(Nx.abs(x * x - a) > 1.0e-6) do
            {x - (x * x - a) / (2 * x), a, i + 1}
          end

        x
      end,
      fn g, y -> y / g.(Nx.broadcast(1.0, y)) end
    )
  end

  defn grad_root(a), do: grad(a, &Nx.sum(newton_sqrt(&1)))

  defn cg(a, b) do
    x = 0.0 * b
    r = b - Nx.dot(a, x)

    {x, _r, _p, _rs, _a, _i} =
      while {x, r, p = r, rs = Nx.sum(r * r), a, i = 0}, i < 100 and rs > 1.0e-10 do
        ap = Nx.dot(a, p)
        alpha = rs / Nx.sum(p * ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = Nx.sum(r * r)
        {x, r, r + rs_new / rs * p, rs_new, a, i + 1}
      end

    x
  end

  defn grad_solve(a, b) do
    grad({a, b}, fn {a, b} ->
      x = custom_linear_solve(&Nx.dot(a, &1), b, fn _m, b -> cg(a, b) end, nil, symmetric: true)
      Nx.sum(Nx.sin(x))
    end)
  end

  deftransformp log1pexp(x) do
    custom_jvp(&Nx.log1p(Nx.exp(&1)), [x], fn [x], [t] ->
      Nx.multiply(t, Nx.subtract(1, Nx.divide(1, Nx.add(1, Nx.exp(x)))))
    end)
  end

  defn grad_custom_jvp(x), do: grad(x, &Nx.sum(log1pexp(&1)))

  defn layer(w, x), do: Nx.tanh(Nx.dot(w, Nx.tanh(Nx.dot(w, x))))
  defn tangent(w, x, t), do: elem(jvp(&layer(w, &1), x, t), 1)

  defn cubic(x), do: Nx.sum(x * x * x + Nx.sin(x))
  defn hess(x), do: hessian(&cubic/1, x)
  defn jac_fwd(w, x), do: jacfwd(&layer(w, &1), x)

  def p50(fun, n) do
    samples =
      for _ <- 1..n do
        t0 = System.monotonic_time(:nanosecond)
        fun.()
        System.monotonic_time(:nanosecond) - t0
      end

    Enum.at(Enum.sort(samples), div(n, 2)) / 1000
  end

  # the first call's time, and the byte size of the graph it sent to the worker (the graph
  # argument of NxJax.Worker.run_cached/5, which both front ends call), seen by call tracing
  def first(fun) do
    me = self()

    tracer =
      spawn(fn ->
        receive do
          {:trace, _pid, :call, {NxJax.Worker, :run_cached, [_key, graph | _]}} ->
            send(me, {:graph_bytes, byte_size(graph)})
        end
      end)

    :erlang.trace_pattern({NxJax.Worker, :run_cached, 5}, true, [:global])
    :erlang.trace(:all, true, [:call, {:tracer, tracer}])
    t0 = System.monotonic_time(:microsecond)
    fun.()
    ms = (System.monotonic_time(:microsecond) - t0) / 1000
    :erlang.trace(:all, false, [:call])
    :erlang.trace_pattern({NxJax.Worker, :run_cached, 5}, false, [:global])

    bytes =
      receive do
        {:graph_bytes, bytes} -> bytes
      after
        1000 -> nil
      end

    Process.exit(tracer, :kill)
    {ms, bytes}
  end
end

real? =
  Code.ensure_loaded?(Nx.Defn.Compiler) and
    function_exported?(Nx.Defn.Compiler, :to_lazy_params, 2)

if real?, do: Nx.Defn.global_default_options(compiler: NxJax)

key = Nx.Random.key(0)
{w, key} = Nx.Random.normal(key, 0.0, 0.2, shape: {64, 64})
{x, key} = Nx.Random.normal(key, shape: {64})
{t, _key} = Nx.Random.normal(key, shape: {64})
m = Nx.add(Nx.eye(16), Nx.multiply(0.05, Nx.iota({16, 16}) |> Nx.remainder(3)))
spd = Nx.dot(m, Nx.transpose(m))
b = Nx.iota({16}, type: :f32) |> Nx.divide(16)
x8 = Nx.iota({8}, type: :f32) |> Nx.divide(8)
x16 = Nx.iota({16}, type: :f32) |> Nx.divide(16)
# (every argument made before the timed calls: under the clean room an eager op is a graph of
# its own on the worker)
b1 = Nx.add(b, 1.0)
w16 = Nx.slice(w, [0, 0], [16, 16])

rows = [
  {"grad of custom_root (Newton sqrt, 16 entries)", fn -> ToolboxBench.grad_root(b1) end},
  {"grad of custom_linear_solve (CG, 16x16)", fn -> ToolboxBench.grad_solve(spd, b) end},
  {"grad of custom_jvp (log1pexp, 64)", fn -> ToolboxBench.grad_custom_jvp(x) end},
  {"jvp of tanh(W tanh(W x)) (64)", fn -> ToolboxBench.tangent(w, x, t) end},
  {"jacfwd of tanh(W tanh(W x)) (16 of 64 columns: x16)",
   fn -> ToolboxBench.jac_fwd(w16, x16) end},
  {"hessian of sum(x^3 + sin x) (8)", fn -> ToolboxBench.hess(x8) end}
]

IO.puts("front end: #{if real?, do: "real Nx 0.7.2", else: "clean room"}")
IO.puts("| function | graph sent | first call | later calls (p50) | worker ping (p50) |")

for {name, fun} <- rows do
  {first, bytes} = ToolboxBench.first(fun)
  warm = ToolboxBench.p50(fun, 30)
  ping = ToolboxBench.p50(fn -> NxJax.Worker.call(:ping, [], []) end, 30)

  IO.puts(
    "| #{name} | #{bytes} B | #{Float.round(first, 1)} ms | #{Float.round(warm, 1)} us | " <>
      "#{Float.round(ping, 1)} us |"
  )
end
