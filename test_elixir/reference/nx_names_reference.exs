# Generator of nx_0.7.2_names.tsv: what real Nx 0.7.2 answers for each case of
# nx_names_cases.exs. Not run by our test suite: run once against a build of Nx v0.7.2 and
# commit its output:
#
#     cd /work/refnx/nx && MIX_ENV=test mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_names_reference.exs
#
# One line per case, in order: NAME <TAB> ok <TAB> inspect(result) or
# NAME <TAB> error <TAB> ExceptionModule: message, newlines written as "\n". Running this
# file with nx_jax's `mix run` instead prints the same format to stdout, to compare.
Code.require_file("reference_format.exs", __DIR__)

dir = Path.dirname(__ENV__.file)
{cases, _} = Code.eval_file(Path.join(dir, "nx_names_cases.exs"))

text =
  Enum.map_join(cases, "", fn {name, fun} ->
    name <> "\t" <> NxJax.ReferenceFormat.inspect_answer(fun) <> "\n"
  end)

if Code.ensure_loaded?(NxJax.Worker) do
  IO.write(text)
else
  "0.7.2" = to_string(Application.spec(:nx, :vsn))
  File.write!(Path.join(dir, "nx_0.7.2_names.tsv"), text)
end
