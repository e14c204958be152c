defmodule NxJax.Worker.Placement do
  @moduledoc false
  # A worker's platform and device as the runtime needs them at start (docs/DEPLOYMENT.md,
  # "Accelerators"; the user's view is NxJax.Devices): the environment that names them to the
  # worker, and how many devices a platform has when a pool of :per_device is sized. Pure
  # functions of the options and the config, so that NxJax.Worker.Config and NxJax.Pool use
  # them without calling back up into NxJax.Devices (which asks a running worker).

  @doc false
  # the worker's environment for its platform and device: start options, else the config
  def env(opts) do
    platform =
      Keyword.get_lazy(opts, :platform, fn -> Application.get_env(:nx_jax, :platform) end)

    device = Keyword.get_lazy(opts, :device, fn -> Application.get_env(:nx_jax, :device) end)

    platform_env =
      case platform do
        nil ->
          []

        name when is_atom(name) or is_binary(name) ->
          [{"NX_JAX_PLATFORM", to_string(name)}]

        other ->
          raise ArgumentError,
                "the nx_jax platform must be a name such as \"cuda\", got: #{inspect(other)}"
      end

    device_env =
      case device do
        nil ->
          []

        index when is_integer(index) and index >= 0 ->
          [{"NX_JAX_DEVICE", Integer.to_string(index)}]

        other ->
          raise ArgumentError,
                "the nx_jax device must be a non-negative index, got: #{inspect(other)}"
      end

    platform_env ++ device_env
  end

  @doc false
  # how many devices JAX sees on `platform` (nil: its default), asked of the worker's Python
  # once, when a pool of :per_device is sized
  def count(python, platform) do
    probe = "import jax, sys; print(len(jax.devices(sys.argv[1] or None)))"
    root = NxJax.Worker.Sources.project_root()

    case System.cmd(python, ["-c", probe, to_string(platform || "")],
           cd: root,
           stderr_to_stdout: true
         ) do
      {output, 0} ->
        output |> String.split("\n", trim: true) |> List.last() |> String.to_integer()

      {output, _} ->
        raise ArgumentError,
              "pool_size: :per_device needs the devices of platform #{inspect(platform)}, and " <>
                "JAX could not list them: #{String.slice(output, -500, 500)}"
    end
  end
end
