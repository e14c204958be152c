defmodule NxJax.TestModulesTest do
  # Two test files that define the same module replace each other's code while the suite
  # loads: with async modules already running, the tests of one file vanish or run against
  # the other's functions, depending on timing (autodiff_test.exs and defn_test.exs both
  # defined NxJax.DefnTest once).
  use ExUnit.Case, async: true

  @root Path.expand(".", __DIR__)

  test "every top-level module of the ExUnit suite is defined in one file only" do
    files = Path.wildcard(Path.join(@root, "**/*.exs"))
    assert length(files) > 50

    defined =
      for file <- files,
          [_, name] <- Regex.scan(~r/^defmodule\s+([\w.]+)\s+do/m, File.read!(file)),
          do: {name, Path.relative_to(file, @root)}

    assert {"NxJax.TestModulesTest", "test_modules_test.exs"} in defined

    twice =
      defined
      |> Enum.group_by(&elem(&1, 0), &elem(&1, 1))
      |> Enum.filter(fn {_name, where} -> length(where) > 1 end)

    assert twice == [], "modules defined in more than one file: #{inspect(twice)}"
  end
end
