# Generator of nx_0.7.2_kernel_exports.txt: the functions and macros that REAL Nx 0.7.2's
# Nx.Defn.Kernel exports (name/arity, one a line, "function NAME/ARITY" or
# "macro NAME/ARITY", sorted). test_elixir/kernel_exports_test.exs holds ours equal to it:
# defn bodies import this module, so a name it has that Nx's lacks breaks a program that
# defines a function of that name (and one it lacks breaks a program that calls it).
#
# This script is not run by our test suite. To regenerate, build real Nx 0.7.2
# (bash /work/shared/reference/build-real-nx.sh /tmp/realnx) and run, from there:
#
#     cd /tmp/realnx/nx-0.7.2/nx && mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_kernel_exports_reference.exs
#
# It (over)writes nx_0.7.2_kernel_exports.txt beside this script.

unless Application.spec(:nx, :vsn) == ~c"0.7.2" do
  raise "run this against real Nx 0.7.2"
end

lines =
  for kind <- [:functions, :macros],
      {name, arity} <- Nx.Defn.Kernel.__info__(kind) do
    "#{if kind == :functions, do: "function", else: "macro"} #{name}/#{arity}"
  end

path = Path.join(__DIR__, "nx_0.7.2_kernel_exports.txt")
File.write!(path, lines |> Enum.sort() |> Enum.map_join(&[&1, "\n"]))
IO.puts("wrote #{length(lines)} exports to #{path}")
