# Generator of nx_0.7.2_heatmap.tsv: what real Nx 0.7.2 prints for each case of
# nx_heatmap_cases.exs (Nx.to_heatmap/2). Not run by our test suite: run once against a
# build of Nx 0.7.2 (../shared/reference/build-real-nx.sh DIR), without Mix, and commit its
# output:
#
#     N=DIR/nx-0.7.2/nx/_build/dev/lib
#     elixir -pa $N/nx/ebin -pa $N/complex/ebin -pa $N/telemetry/ebin \
#       test_elixir/reference/nx_heatmap_reference.exs
#
# One line per case, in order: NAME <TAB> the case's answer (the function at the end of
# nx_heatmap_cases.exs). Running this file with nx_jax's `mix run` instead prints the same
# lines to stdout, to compare.
# (without Mix, Nx's application environment is there once the application is loaded)
_ = Application.load(:nx)
dir = Path.dirname(__ENV__.file)
{{cases, answer}, _} = Code.eval_file(Path.join(dir, "nx_heatmap_cases.exs"))

text = Enum.map_join(cases, "", fn {name, fun} -> name <> "\t" <> answer.(fun) <> "\n" end)

if Code.ensure_loaded?(NxJax.Worker) do
  IO.write(text)
else
  "0.7.2" = to_string(Application.spec(:nx, :vsn))
  File.write!(Path.join(dir, "nx_0.7.2_heatmap.tsv"), text)
end
