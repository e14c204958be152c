# Generator of nx_0.7.2_random.tsv: what REAL Nx 0.7.2 (Nx.BinaryBackend,
# Nx.Defn.Evaluator) returns for each case of nx_random_cases.exs.
#
# README
#
# This script is not run by our test suite; it is run once against a build
# of upstream Nx v0.7.2 and its output file is committed. To regenerate,
# from a checkout of Nx v0.7.2 whose deps are compiled (ours is at
# /work/refnx/nx):
#
#     cd /work/refnx/nx && MIX_ENV=test mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_random_reference.exs
#
# It reads nx_random_cases.exs from its own directory and (over)writes
# nx_0.7.2_random.tsv there. It refuses to run against anything but Nx
# 0.7.2. The output is deterministic: no clock or randomness goes into it
# (timings go to stdout only), so regenerating on the same Nx must give a
# byte-identical file.
#
# Output format (UTF-8, one line per case, in the order of the cases file,
# columns separated by one TAB):
#
#     NAME <TAB> ok <TAB> LEAVES [<TAB> NAMES]
#     NAME <TAB> error <TAB> ExceptionModule: message
#
# LEAVES: the value (a tensor, or a tuple of tensors, tuples may nest) is
# flattened depth-first, left to right; the leaves are joined by " ; " and
# each is written "TYPE SHAPE HEX": TYPE as Nx prints it (u32, s64, bf16,
# f16, c64 ...), SHAPE as "{}" or "{3,2}" (no spaces), HEX the lowercase
# hex of Nx.to_binary/1 (native byte order; little endian on the machine
# that produced the file). HEX is empty for a tensor with no elements.
#
# NAMES: a 4th column appears only when some leaf has a non-nil axis name;
# it then gives, for every leaf in the same order and joined by " ; ", the
# names as "[x,nil]" ("[]" for a scalar).
#
# Error messages are Exception.message/1 with "\" written as "\\", newline
# as "\n", TAB as "\t" and carriage return as "\r". A throw or exit (none
# expected) would be written as "throw: <inspect>" / "exit: <inspect>".
#
# Lines starting with "#" are comments (the header).
#
# What the numbers reflect (worth knowing before asking for bit equality):
#
#   * Integer work (key, split, fold_in, threefry, randint, shuffle, choice
#     without p) and the bit-twiddling part of uniform are exact, so those
#     leaves can be compared bit for bit.
#   * Nx.BinaryBackend computes float ops on Erlang doubles and stores the
#     result in the tensor type. f16 and f32 stores round to nearest even,
#     but bf16 stores TRUNCATE (the low 16 bits of the f32 pattern are
#     dropped). Any bf16 leaf that went through inexact arithmetic (bounds
#     other than 0..1, normal, gumbel, multivariate_normal) carries that
#     truncation; XLA rounds to nearest even instead.
#   * erf_inv (normal, multivariate_normal) is Giles' single-precision
#     polynomial evaluated in doubles, for every float type (f64 included);
#     log (gumbel) is :math.log. Expect last-ulp differences from XLA in f32
#     and larger ones in f64.
#   * multivariate_normal's :svd / :eigh / :cholesky are the binary
#     backend's own Nx.LinAlg algorithms.

Code.require_file("reference_format.exs", __DIR__)

defmodule NxRandomReference do
  alias NxJax.ReferenceFormat, as: Format

  def run do
    vsn = to_string(Application.spec(:nx, :vsn))

    if vsn != "0.7.2" do
      raise "this generator must run against Nx 0.7.2, found Nx #{vsn}"
    end

    dir = __DIR__
    cases_path = Path.join(dir, "nx_random_cases.exs")
    out_path = Path.join(dir, "nx_0.7.2_random.tsv")

    {cases, _} = Code.eval_file(cases_path)
    check_cases!(cases)

    started = System.monotonic_time(:millisecond)

    {lines, counts, slow} =
      Enum.reduce(cases, {[], %{ok: 0, error: 0}, []}, fn {name, code}, {lines, counts, slow} ->
        t0 = System.monotonic_time(:millisecond)
        {status, line} = run_case(name, code)
        ms = System.monotonic_time(:millisecond) - t0
        IO.puts("#{String.pad_leading(Integer.to_string(ms), 7)} ms  #{status}  #{name}")
        slow = if ms > 30_000, do: [{name, ms} | slow], else: slow
        {[line | lines], Map.update!(counts, status, &(&1 + 1)), slow}
      end)

    total_ms = System.monotonic_time(:millisecond) - started

    header = [
      "# Nx.Random reference data from REAL Nx #{vsn} (Nx.BinaryBackend, Nx.Defn.Evaluator),",
      "# Elixir #{System.version()}, Erlang/OTP #{:erlang.system_info(:otp_release)}, #{endianness()} endian.",
      "# Produced by: cd <Nx v0.7.2 checkout> && MIX_ENV=test mix run <nx_jax>/test_elixir/reference/nx_random_reference.exs",
      "# (absolute path to the script); cases from test_elixir/reference/nx_random_cases.exs.",
      "# #{length(cases)} cases: #{counts.ok} ok, #{counts.error} error.",
      "# Columns (TAB-separated): NAME, ok, LEAVES[, NAMES]  |  NAME, error, Module: message",
      "# LEAVES: depth-first leaves of the result joined by \" ; \", each \"TYPE SHAPE HEX\"",
      "#   (HEX = lowercase hex of Nx.to_binary, native byte order).",
      "# NAMES: only when some axis name is non-nil; per leaf \"[x,nil]\" joined by \" ; \".",
      "# Messages: \\ as \\\\, newline as \\n, TAB as \\t, CR as \\r. See the generator for details."
    ]

    File.write!(out_path, Enum.join(header ++ Enum.reverse(lines), "\n") <> "\n")

    IO.puts(
      "wrote #{out_path}: #{length(cases)} cases (#{counts.ok} ok, #{counts.error} error) " <>
        "in #{total_ms} ms, #{File.stat!(out_path).size} bytes"
    )

    for {name, ms} <- Enum.reverse(slow), do: IO.puts("SLOW (> 30 s): #{name} #{ms} ms")
  end

  defp check_cases!(cases) do
    unless is_list(cases) and cases != [], do: raise("the cases file must give a non-empty list")

    Enum.each(cases, fn
      {name, code} when is_binary(name) and is_binary(code) ->
        unless name =~ ~r/\A[a-z0-9_]+\z/, do: raise("bad case name #{inspect(name)}")

      other ->
        raise "a case must be a {name, code} pair of strings, got: #{inspect(other)}"
    end)

    dups = cases |> Enum.frequencies_by(&elem(&1, 0)) |> Enum.filter(fn {_, n} -> n > 1 end)
    if dups != [], do: raise("duplicate case names: #{inspect(Enum.map(dups, &elem(&1, 0)))}")
  end

  defp run_case(name, code) do
    result =
      try do
        {value, _binding} = Code.eval_string(code)
        {:ok, value}
      rescue
        e -> {:error, Format.exception(e)}
      catch
        kind, reason -> {:error, "#{kind}: #{Format.escape(inspect(reason))}"}
      end

    case result do
      {:ok, value} ->
        leaves = flatten(value, name)
        cols = [name, "ok", Enum.map_join(leaves, " ; ", &Format.leaf/1)]

        cols =
          if Enum.any?(leaves, fn t -> Enum.any?(t.names, &(&1 != nil)) end) do
            cols ++ [Enum.map_join(leaves, " ; ", &names/1)]
          else
            cols
          end

        {:ok, Enum.join(cols, "\t")}

      {:error, text} ->
        {:error, Enum.join([name, "error", text], "\t")}
    end
  end

  defp flatten(value, name) do
    Format.leaves(value)
  rescue
    e in ArgumentError -> reraise "case #{name}: #{e.message}", __STACKTRACE__
  end

  defp names(t),
    do: "[" <> Enum.map_join(t.names, ",", &if(&1, do: to_string(&1), else: "nil")) <> "]"

  defp endianness do
    case <<1::native-32>> do
      <<1, 0, 0, 0>> -> "little"
      _ -> "big"
    end
  end
end

NxRandomReference.run()
