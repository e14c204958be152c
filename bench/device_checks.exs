# The accelerator checks of `bench/device_kit.sh check` (docs/DEPLOYMENT.md, "Accelerators"):
#
#   mix run bench/device_checks.exs [PLATFORM] [OUT.md]
#
# PLATFORM: a JAX platform name ("cuda", "rocm", "tpu", "cpu"); default: the platform of the
# device JAX picks first. Each check runs through real workers started on that platform:
# 1. the worker reports the platform and its devices (`NxJax.devices/0`);
# 2. the same numbers as a worker on the CPU, to a tolerance, for a matrix product, a linear solve,
#    the custom_grad log1pexp gradient at 100.0 and one MLP training step;
# 3. `pool_size: :per_device`: one worker per device, each on its own device;
# 4. the MLP step with resident weights against in-process JAX on the same device (the ratio of
#    docs/BENCHMARKS.md section 3).
# Prints a Markdown report and writes it to OUT.md when given; exits 1 if a check failed. Runs on
# a CPU-only machine too (PLATFORM cpu: every check then compares the CPU with itself).
Code.require_file("lib.exs", __DIR__)

defmodule DeviceChecks do
  import Nx.Defn

  defn log1pexp(t) do
    custom_grad(Nx.log1p(Nx.exp(t)), [t], fn g -> [g * (1 - 1 / (1 + Nx.exp(t)))] end)
  end

  defn grad_log1pexp(t), do: grad(t, &log1pexp/1)

  # the largest difference between two results (containers of tensors), relative to the
  # largest magnitude of the reference
  def rel_diff(got, want) do
    pairs = Enum.zip(flat(got), flat(want))

    Enum.map(pairs, fn {g, w} ->
      diff = Nx.subtract(g, w) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
      scale = Nx.abs(w) |> Nx.reduce_max() |> Nx.to_number() |> max(1.0e-30)
      diff / scale
    end)
    |> Enum.max()
  end

  defp flat(%Nx.Tensor{} = t), do: [Nx.backend_copy(t, Nx.BinaryBackend)]
  defp flat(tuple) when is_tuple(tuple), do: Enum.flat_map(Tuple.to_list(tuple), &flat/1)
end

{platform, out} =
  case System.argv() do
    [p, o | _] -> {p, o}
    [p] -> {p, nil}
    [] -> {nil, nil}
  end

platform = if platform in [nil, ""], do: NxJax.devices().platform, else: platform
IO.puts("device checks on platform #{platform}")
Application.put_env(:nx_jax, :platform, platform)
Bench.restart_pool(1)
checks = :ets.new(:checks, [:ordered_set, :public])
n = :counters.new(1, [])

check = fn name, ok?, detail ->
  :counters.add(n, 1, 1)
  :ets.insert(checks, {:counters.get(n, 1), name, ok?, detail})
  IO.puts("   #{%{true => "ok  ", false => "FAIL", measured: "    "}[ok?]} #{name}: #{detail}")
end

# 1. what the worker reports
dev = NxJax.devices()

check.(
  "the worker computes on #{platform}",
  dev.platform == platform,
  "platform #{dev.platform}, device #{dev.device}, devices #{Enum.join(dev.devices, ", ")}"
)

# 2. the same numbers as on the CPU (f32 products may use TF32 on GPUs: 1e-2 for those)
{:ok, cpu} = NxJax.Worker.start_link(platform: "cpu")
on_cpu = fn fun, args -> apply(Nx.Defn.jit(fun, server: cpu), args) end
on_dev = fn fun, args -> apply(Nx.Defn.jit(fun), args) end
key = Nx.Random.key(42)
{a, key} = Nx.Random.normal(key, shape: {256, 256}, type: :f32)
{b, _key} = Nx.Random.normal(key, shape: {256, 4}, type: :f32)
a = Nx.add(a, Nx.multiply(Nx.eye(256), 32.0))
x = Nx.iota({64, 256}, type: :f32) |> Nx.remainder(17) |> Nx.subtract(8) |> Nx.divide(8)
y = Nx.divide(Nx.iota({64, 1}, type: :f32), 64)
w1 = Nx.iota({256, 256}, type: :f32) |> Nx.remainder(13) |> Nx.subtract(6) |> Nx.divide(120)
w2 = Nx.iota({256, 1}, type: :f32) |> Nx.remainder(7) |> Nx.subtract(3) |> Nx.divide(60)

for {name, fun, args, tol} <- [
      {"matrix product 256x256 f32", &Nx.dot/2, [a, a], 1.0e-2},
      {"Nx.LinAlg.solve 256x256 f32", &Nx.LinAlg.solve/2, [a, b], 1.0e-2},
      {"custom_grad log1pexp gradient at 100.0", &DeviceChecks.grad_log1pexp/1,
       [Nx.tensor(100.0)], 1.0e-6},
      {"MLP training step", &Bench.step/3, [{w1, w2}, x, y], 1.0e-2}
    ] do
  want = on_cpu.(fun, args)
  got = on_dev.(fun, args)
  diff = DeviceChecks.rel_diff(got, want)

  check.(
    "#{name}: #{platform} = cpu",
    diff <= tol,
    "largest difference #{:erlang.float_to_binary(diff, [{:scientific, 2}])} of the largest " <>
      "value (tolerance #{tol})"
  )
end

GenServer.stop(cpu)

grad_100 = DeviceChecks.grad_log1pexp(Nx.tensor(100.0)) |> Nx.to_number()
check.("custom_grad log1pexp gradient at 100.0 is 1.0", grad_100 == 1.0, "got #{grad_100}")

# 3. one worker per device
Application.put_env(:nx_jax, :pool_size, :per_device)
:ok = Supervisor.terminate_child(NxJax.Supervisor, NxJax.Pool)
Application.put_env(:nx_jax, :worker_env, [])
{:ok, _} = Supervisor.restart_child(NxJax.Supervisor, NxJax.Pool)
workers = NxJax.Pool.workers()
devices = Enum.map(workers, &NxJax.devices(server: &1).device)

check.(
  "pool_size: :per_device starts one worker per device",
  length(workers) == length(dev.devices) and Enum.uniq(devices) == devices,
  "#{length(workers)} worker(s) for #{length(dev.devices)} device(s), on #{Enum.join(devices, ", ")}"
)

Application.put_env(:nx_jax, :pool_size, 1)
Bench.restart_pool(1)

# 4. the resident MLP step against in-process JAX on the same device
IO.puts("   MLP step, 400 steps each")
mlp = Bench.mlp_rows(400)
ratio = mlp.resident.p50 / mlp.jax.p50

check.(
  "MLP step, weights resident, against in-process JAX",
  :measured,
  "p50 #{Float.round(mlp.resident.p50, 1)} us vs #{Float.round(mlp.jax.p50, 1)} us: " <>
    "#{Float.round(ratio, 2)}x (shipped: #{Float.round(mlp.shipped.p50 / mlp.jax.p50, 2)}x)"
)

rows = :ets.tab2list(checks)
failed = Enum.count(rows, fn {_, _, ok?, _} -> ok? == false end)
passed = Enum.count(rows, fn {_, _, ok?, _} -> ok? == true end)
info = NxJax.Worker.call(:info, [])

result = %{true => "ok", false => "**FAILED**", measured: "measured"}

table =
  Enum.map_join(rows, "\n", fn {_, name, ok?, detail} ->
    "| #{name} | #{result[ok?]} | #{detail} |"
  end)

report = """
## Device checks (`bench/device_kit.sh check`, #{Date.utc_today()})

#{Bench.cpu_model()}, #{System.schedulers_online()} cores; JAX #{info[:jax_version]}, platform #{platform}, devices: #{Enum.join(dev.devices, ", ")}.
#{passed} of #{passed + failed} checks passed.

| check | result | detail |
| --- | --- | --- |
#{table}
"""

IO.puts(report)
if out, do: File.write!(out, report)
if failed > 0, do: System.halt(1)
