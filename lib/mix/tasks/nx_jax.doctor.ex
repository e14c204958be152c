defmodule Mix.Tasks.NxJax.Doctor do
  @shortdoc "Checks the nx_jax worker's Python, JAX, sources and settings"
  @moduledoc """
  Checks what nx_jax needs and prints it, with a fix for each problem (`NxJax.Doctor`):

      mix nx_jax.doctor
      mix nx_jax.doctor --python /path/to/python    # check another Python

  Exits with status 1 when a problem was found.
  """
  use Mix.Task

  @impl true
  def run(args) do
    {opts, _rest} = OptionParser.parse!(args, strict: [python: :string, pings: :integer])
    Mix.Task.run("app.config")
    {:ok, _} = Application.ensure_all_started(:logger)
    checks = NxJax.Doctor.report(opts)
    Mix.shell().info(NxJax.Doctor.format(checks))
    problems = Enum.count(checks, &(elem(&1, 0) == :problem))

    if problems > 0 do
      Mix.shell().error("\n#{problems} problem(s) found")
      exit({:shutdown, 1})
    else
      Mix.shell().info("\nno problem found")
    end
  end
end
