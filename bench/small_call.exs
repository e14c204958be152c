# Section 1 of bench/run.exs (the small call) in a VM of its own, so that run.exs can measure it
# under other emulator flags (`elixir --erl "+IOs true" -S mix run bench/small_call.exs N`).
# Prints one line: SMALL_CALL <base64 of the term_to_binary of the result>.
Code.require_file("lib.exs", __DIR__)

n = String.to_integer(List.first(System.argv()) || "2000")
Bench.restart_pool(1)
rows = Bench.small_call_rows(n)
jax = Bench.inprocess(n)["scalar"]
result = %{rows: rows, jax: jax, scheduler_polling: Bench.scheduler_polling?()}
IO.puts("SMALL_CALL " <> Base.encode64(:erlang.term_to_binary(result)))
