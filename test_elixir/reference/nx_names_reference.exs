# Generator of nx_0.7.2_names.tsv: what real Nx 0.7.2 answers for each case of
# nx_names_cases.exs. Not run by our test suite: run once against a build of Nx v0.7.2 and
# commit its output:
#
#     cd /work/refnx/nx && MIX_ENV=test mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_names_reference.exs
#
# One line per case, in order: NAME <TAB> ok <TAB> inspect(result) or
# NAME <TAB> error <TAB> ExceptionModule: message, newlines written as "\n". Running this
# file with nx_jax's `mix run` instead prints the same format to stdout, to compare.
defmodule NamesReference do
  def line({name, fun}) do
    result =
      try do
        "ok\t" <> inspect(fun.())
      rescue
        e -> "error\t" <> inspect(e.__struct__) <> ": " <> Exception.message(e)
      end

    name <> "\t" <> String.replace(result, "\n", "\\n")
  end
end

dir = Path.dirname(__ENV__.file)
{cases, _} = Code.eval_file(Path.join(dir, "nx_names_cases.exs"))
text = Enum.map_join(cases, "", &(NamesReference.line(&1) <> "\n"))

if Code.ensure_loaded?(NxJax.Worker) do
  IO.write(text)
else
  "0.7.2" = to_string(Application.spec(:nx, :vsn))
  File.write!(Path.join(dir, "nx_0.7.2_names.tsv"), text)
end
