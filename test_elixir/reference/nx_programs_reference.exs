# Writes nx_0.7.2_programs.tsv: REAL Nx 0.7.2's answer to each case of nx_programs_cases.exs (one
# line each, NxProgramsCases.line/1). Not run by our suites; run it against a build of Nx 0.7.2
# (../shared/reference/build-real-nx.sh DIR):
#
#     cd DIR/nx-0.7.2/nx && mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_programs_reference.exs
"0.7.2" = to_string(Application.spec(:nx, :vsn))
Code.require_file("nx_programs_cases.exs", __DIR__)
lines = Enum.map(NxProgramsCases.cases(), &NxProgramsCases.line/1)
File.write!(Path.join(__DIR__, "nx_0.7.2_programs.tsv"), Enum.join(lines, "\n") <> "\n")
IO.puts("wrote #{length(lines)} cases")
