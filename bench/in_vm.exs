# One section of bench/run.exs in a VM of its own, so that run.exs can measure it under other
# emulator flags: `ERL_FLAGS="+IOs false" mix run bench/in_vm.exs small|mlp N`. Prints one line:
# IN_VM <base64 of the term_to_binary of the result> (see Bench.in_vm/3).
Code.require_file("lib.exs", __DIR__)

[section, n] = System.argv()
n = String.to_integer(n)
Bench.restart_pool(1)

result =
  case section do
    "small" ->
      %{rows: Bench.small_call_rows(n), jax: Bench.inprocess(n)["scalar"]}

    "mlp" ->
      %{rows: Bench.mlp_rows(n)}
  end

result = Map.put(result, :scheduler_polling, Bench.scheduler_polling?())
IO.puts("IN_VM " <> Base.encode64(:erlang.term_to_binary(result)))
