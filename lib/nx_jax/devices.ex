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
end
