# Runs test files of Nx 0.7.2, unchanged, against nx_jax's front end and prints how many of
# their tests pass (nx/nx_suite/README.md). Usage, from the project root:
#
#     NX_SRC=/path/to/nx-0.7.2/nx MIX_ENV=nx_suite mix run nx/nx_suite/run.exs [test/nx/defn/grad_test.exs ...]
#
# NX_SRC is the nx/ folder of a checkout of Nx's tag v0.7.2 (it is read, never copied here).
# Without file arguments the files named in DEFAULT_FILES below run. Doctests that the files
# declare (`doctest Nx`) run our own documentation, so they are counted apart.

defmodule NxSuite.Tally do
  @moduledoc false
  # An ExUnit formatter that counts finished tests per file in a public ETS table.
  use GenServer

  def init(_opts), do: {:ok, nil}

  def handle_cast({:test_finished, %ExUnit.Test{} = test}, state) do
    kind = if test.tags[:test_type] == :doctest, do: :doctest, else: :test

    outcome =
      case test.state do
        nil -> :passed
        {:failed, _} -> :failed
        {:invalid, _} -> :failed
        {:excluded, _} -> :excluded
        {:skipped, _} -> :excluded
      end

    :ets.update_counter(:nx_suite, {test.tags.file, kind, outcome}, 1, {nil, 0})

    if outcome == :failed and kind == :test do
      :ets.insert(:nx_suite_failures, {test.tags.file, test.name, failure_line(test.state)})
    end

    {:noreply, state}
  end

  def handle_cast(_event, state), do: {:noreply, state}

  defp failure_line({_, [{_kind, error, _stack} | _]}) when is_exception(error) do
    error
    |> Exception.message()
    |> String.split("\n", trim: true)
    |> List.first("")
    |> String.slice(0, 160)
  end

  defp failure_line({_, failures}) when is_list(failures),
    do: inspect(failures) |> String.slice(0, 160)

  defp failure_line(other), do: inspect(other) |> String.slice(0, 160)
end

defmodule NxSuite do
  @moduledoc false

  @default_files ~w(
    test/nx/defn/grad_test.exs
    test/nx/defn/evaluator_test.exs
    test/nx/defn/kernel_test.exs
    test/nx/defn_test.exs
    test/nx_test.exs
    test/nx/lin_alg_test.exs
    test/nx/random_test.exs
    test/nx/vectorize_test.exs
    test/nx/non_finite_test.exs
    test/nx/complex_test.exs
    test/nx/container_test.exs
    test/nx/lazy_container_test.exs
    test/nx/defn/stream_test.exs
    test/nx/serving_test.exs
    test/nx/batch_test.exs
  )

  # the test files whose :distributed tests need peer nodes (NxSuite.Peers)
  @distributed_files ~w(test/nx/serving_test.exs)

  def main(argv) do
    src = System.get_env("NX_SRC") || abort("set NX_SRC to the nx/ folder of Nx v0.7.2")
    src = Path.expand(src)
    unless File.exists?(Path.join(src, "lib/nx.ex")), do: abort("#{src}/lib/nx.ex not found")
    files = if argv == [], do: @default_files, else: argv

    :ets.new(:nx_suite, [:public, :named_table, :set])
    :ets.new(:nx_suite_failures, [:public, :named_table, :bag])
    Code.require_file("support/helpers.ex", __DIR__)
    Code.require_file("support/containers.ex", __DIR__)
    Code.require_file("support/peers.ex", __DIR__)
    start_telemetry(src)

    # the distributed tests run on peer nodes, started as Nx's test_helper.exs starts them,
    # where a file that has them is run and NX_SUITE_DISTRIBUTED is not 0
    peers =
      if Enum.any?(files, &(&1 in @distributed_files)) and
           System.get_env("NX_SUITE_DISTRIBUTED") != "0",
         do: NxSuite.Peers.start(src),
         else: []

    ExUnit.start(
      autorun: false,
      formatters: formatters(),
      assert_receive_timeout: 1000,
      exclude: if(peers == [], do: [:distributed], else: []),
      timeout: 120_000
    )

    # Nx's suite runs from its nx/ folder, and some tests read fixtures at paths relative to
    # it (test/fixtures/numpy/...): each file runs with that folder as the working directory
    rows =
      Enum.map(files, fn file -> File.cd!(src, fn -> run_file(Path.join(src, file), file) end) end)

    NxSuite.Peers.stop(peers)
    print(rows)
    if path = System.get_env("NX_SUITE_FAILURES"), do: write_failures(path, rows)
  end

  # Nx 0.7.2 depends on :telemetry, which its serving tests attach handlers with; the clean
  # room emits Nx.Serving's events where it is loaded. The telemetry that NX_SRC's own build
  # fetched (_build/test or _build/dev) is put on the code path and started, where there is one.
  defp start_telemetry(src) do
    case Path.wildcard(Path.join(src, "_build/{test,dev}/lib/telemetry/ebin")) do
      [ebin | _] ->
        Code.prepend_path(ebin)
        {:ok, _} = Application.ensure_all_started(:telemetry)

      [] ->
        IO.puts("nx_suite: no telemetry in #{src}/_build: the telemetry tests fail")
    end
  end

  # NX_SUITE_VERBOSE=1 adds ExUnit's own report of each failure (left, right, stack)
  defp formatters do
    if System.get_env("NX_SUITE_VERBOSE") in [nil, "", "0"],
      do: [NxSuite.Tally],
      else: [NxSuite.Tally, ExUnit.CLIFormatter]
  end

  defp run_file(path, name) do
    try do
      Code.require_file(path)
      ExUnit.run()
      counts = fn kind, outcome -> lookup({path, kind, outcome}) end

      %{
        file: name,
        compiled: true,
        tests: counts.(:test, :passed) + counts.(:test, :failed),
        passed: counts.(:test, :passed),
        excluded: counts.(:test, :excluded),
        doctests:
          "#{counts.(:doctest, :passed)}/#{counts.(:doctest, :passed) + counts.(:doctest, :failed)}"
      }
    rescue
      error ->
        first =
          error
          |> Exception.message()
          |> String.split("\n")
          |> List.first()
          |> String.slice(0, 100)

        %{file: name, compiled: false, error: first}
    end
  end

  defp lookup(key) do
    case :ets.lookup(:nx_suite, key) do
      [{_, n}] -> n
      [] -> 0
    end
  end

  defp print(rows) do
    IO.puts("\n| Nx 0.7.2 file | tests | pass | % | excluded | our doctests |")
    IO.puts("| --- | --- | --- | --- | --- | --- |")

    for row <- rows do
      if row.compiled do
        pct = if row.tests > 0, do: round(100 * row.passed / row.tests), else: 0

        IO.puts(
          "| #{row.file} | #{row.tests} | #{row.passed} | #{pct}% | #{row.excluded} | #{row.doctests} |"
        )
      else
        IO.puts(
          "| #{row.file} | does not compile: #{String.replace(row.error, "|", "\\|")} | | | | |"
        )
      end
    end

    compiled = Enum.filter(rows, & &1.compiled)
    total = Enum.sum(Enum.map(compiled, & &1.tests))
    passed = Enum.sum(Enum.map(compiled, & &1.passed))

    IO.puts(
      "\nnx-suite: #{passed} of #{total} tests pass; #{length(rows) - length(compiled)} files do not compile"
    )
  end

  # one line per failed test; a file that does not compile has one line, with the test "*"
  defp write_failures(path, rows) do
    failed =
      for {file, test, line} <- :ets.tab2list(:nx_suite_failures) |> Enum.sort() do
        "#{Path.basename(file)}\t#{test}\t#{line}"
      end

    uncompiled =
      for row <- rows, not row.compiled do
        "#{Path.basename(row.file)}\t*\tdoes not compile: #{String.replace(row.error, "\n", " ")}"
      end

    lines = uncompiled ++ failed

    File.write!(path, Enum.join(lines, "\n") <> "\n")
  end

  defp abort(message) do
    IO.puts(:stderr, "nx_suite: " <> message)
    System.halt(2)
  end
end

NxSuite.main(System.argv())
