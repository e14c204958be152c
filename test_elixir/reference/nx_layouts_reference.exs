# Generator of nx_0.7.2_layouts.tsv: what REAL Nx 0.7.2 (Nx.BinaryBackend, Nx.Defn.Evaluator)
# returns for each case of nx_layouts_cases.exs. Not run by our tests; run once against a
# build of Nx 0.7.2 (bash /work/shared/reference/build-real-nx.sh DIR gives one) and commit
# its output:
#
#     cd DIR/nx-0.7.2/nx && mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_layouts_reference.exs
#
# One line per case, TAB-separated: NAME, ok, LEAVES, NAMES or NAME, error, Module: message.
# LEAVES and the messages are written by reference_format.exs (TYPE SHAPE HEX per tensor,
# joined by " ; "); NAMES gives each leaf's axis names as inspect/1 writes the list,
# joined by " ; ".
Code.require_file("reference_format.exs", __DIR__)

alias NxJax.ReferenceFormat, as: Format

vsn = to_string(Application.spec(:nx, :vsn))
if vsn != "0.7.2", do: raise("this generator must run against Nx 0.7.2, found Nx #{vsn}")

{cases, _} = Code.eval_file(Path.join(__DIR__, "nx_layouts_cases.exs"))

lines =
  for {name, code} <- cases do
    try do
      {value, _} = Code.eval_string(code)
      leaves = Format.leaves(value)
      names = Enum.map_join(leaves, " ; ", &inspect(&1.names))
      Enum.join([name, "ok", Format.leaves_line(value), names], "\t")
    rescue
      e -> Enum.join([name, "error", Format.exception(e)], "\t")
    end
  end

header =
  "# Nx #{vsn} (Nx.BinaryBackend), cases of nx_layouts_cases.exs, by nx_layouts_reference.exs"

path = Path.join(__DIR__, "nx_0.7.2_layouts.tsv")
File.write!(path, Enum.join([header | lines], "\n") <> "\n")
IO.puts("wrote #{path}: #{length(lines)} cases")
