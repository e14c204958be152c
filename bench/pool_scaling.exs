# Pool scaling on the machine at hand (issue #4, bench section 5 with more worker counts):
# `mix run bench/pool_scaling.exs [OUT.md]`. 8 callers of the small defn through pools of 1, 2 and
# 4 workers (as many as the cores allow); throughput and the cores each OS process kept busy.
# Writes a Markdown paragraph and table to OUT.md when given (bench/run.exs includes
# bench/pool_scaling.md in docs/BENCHMARKS.md). Not a test: nothing here asserts a timing. For a
# machine with Python and JAX but no Erlang/Elixir (the lent accelerator machine), pack them with
# bench/device_kit.sh pack (bench/device_kit.sh check runs this too).
Code.require_file("lib.exs", __DIR__)

cores = System.schedulers_online()
sizes = Enum.filter([1, 2, 4, 8], &(&1 == 1 or 2 * &1 <= cores))
IO.puts("pool scaling: #{cores} cores, pools of #{Enum.join(sizes, ", ")} workers")
# a first round warms everything up; the second is the one reported
_ = Enum.map(sizes, &Bench.pool_throughput(&1, 8, 100))
runs = Enum.map(sizes, &{&1, Bench.pool_throughput(&1, 8, 400)})
{_, one} = hd(runs)
f = fn v, d -> :erlang.float_to_binary(v / 1, decimals: d) end
info = NxJax.Worker.call(:info, [])

rows =
  Enum.map_join(runs, "\n", fn {n, p} ->
    total = p.beam + Enum.sum(p.workers)

    "| #{n} | #{f.(p.rate, 0)} | #{f.(p.rate / one.rate, 2)} | #{f.(p.beam, 2)} | " <>
      "#{Enum.map_join(p.workers, " / ", &f.(&1, 2))} | #{f.(total, 2)} |"
  end)

text = """
The same bench on a larger machine (`mix run bench/pool_scaling.exs`, #{Date.utc_today()}):
#{Bench.cpu_model()}, #{cores} cores, Erlang/OTP #{System.otp_release()}, Elixir #{System.version()},
JAX #{info[:jax_version]} (#{info[:backend]}); 8 callers x 400 calls.

| workers | calls/s | / 1 worker | cores busy: BEAM | cores busy: each worker | cores busy: total |
| --- | --- | --- | --- | --- | --- |
#{rows}
"""

IO.puts(text)

case System.argv() do
  [out | _] -> File.write!(out, text)
  [] -> :ok
end
