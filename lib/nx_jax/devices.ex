defmodule NxJax.Devices do
  @moduledoc """
  Which platform and device a worker computes on (docs/DEPLOYMENT.md, "Accelerators").

  `config :nx_jax, platform: "cuda"` (or `"cpu"`, `"tpu"`, ...: a JAX platform name) and
  `device: 0` (its index among that platform's devices), or the `:platform` and `:device`
  start options of a worker, reach the worker as `NX_JAX_PLATFORM` and `NX_JAX_DEVICE`; it
  makes that device its default, or, when JAX has no such platform or device, refuses work
  with a `"WorkerMismatch"` error listing what JAX reports (`py_backend/placement.py`).
  `config :nx_jax, pool_size: :per_device` starts one worker per device of the platform,
  worker `i` on device `i`.
  """

  @doc """
  The devices of a worker (default: the pool's least busy one), as JAX names them, with the
  platform and the device it computes on: `%{platform: "cpu", device: "cpu:0", devices:
  ["cpu:0"]}`.
  """
  @spec list(keyword) :: %{platform: String.t(), device: String.t(), devices: [String.t()]}
  def list(opts \\ []) do
    info =
      NxJax.Pool.with_worker(
        Keyword.get(opts, :server),
        &NxJax.Worker.call(:info, [], server: &1),
        []
      )

    %{platform: info.platform, device: info.device, devices: info.devices}
  end

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
