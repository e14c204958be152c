defmodule NxJax.ConfigTest do
  # changes the application environment: not async
  use ExUnit.Case, async: false

  # The settings every call reads are read when the application starts (NxJax.Pool), not per
  # call: a change made at run time applies after NxJax.Pool.reload_config/0.
  test "reply_spin_us and remote are read at start and by reload_config/0" do
    before_us = Application.get_env(:nx_jax, :reply_spin_us)
    before_remote = Application.get_env(:nx_jax, :remote)
    started = NxJax.Worker.reply_spin_us()
    assert started == (before_us || 100)

    try do
      Application.put_env(:nx_jax, :reply_spin_us, started + 7)
      Application.put_env(:nx_jax, :remote, false)
      assert NxJax.Worker.reply_spin_us() == started
      NxJax.Pool.reload_config()
      assert NxJax.Worker.reply_spin_us() == started + 7
      assert :persistent_term.get({NxJax.Pool, :remote}) == false
      # calls go on with the new setting
      assert NxJax.Worker.call(:ping, []) == :pong
      # a bad value is refused by the calls that read it, before anything is sent
      Application.put_env(:nx_jax, :reply_spin_us, -1)
      NxJax.Pool.reload_config()

      assert_raise ArgumentError, ~r/reply_spin_us must be a non-negative integer/, fn ->
        NxJax.Worker.call(:ping, [])
      end
    after
      if before_us,
        do: Application.put_env(:nx_jax, :reply_spin_us, before_us),
        else: Application.delete_env(:nx_jax, :reply_spin_us)

      if before_remote == nil,
        do: Application.delete_env(:nx_jax, :remote),
        else: Application.put_env(:nx_jax, :remote, before_remote)

      NxJax.Pool.reload_config()
    end

    assert NxJax.Worker.reply_spin_us() == started
    assert NxJax.Worker.call(:ping, []) == :pong
  end

  defmodule Endless do
    import Nx.Defn

    # f32: x stops growing at 2**24, so the loop never ends
    defn run(x) do
      while x, x >= 0.0 do
        x + 1.0
      end
    end
  end

  test "config :nx_jax, timeout: bounds every call made without a :timeout option" do
    before = Application.fetch_env(:nx_jax, :timeout)
    worker = start_supervised!({NxJax.Worker, []})

    try do
      Application.put_env(:nx_jax, :timeout, 300)
      NxJax.Pool.reload_config()
      assert NxJax.Worker.default_timeout() == 300

      # a defn given no timeout: the setting applies, the caller gets a Timeout error
      error =
        assert_raise NxJax.WorkerError, fn ->
          Nx.Defn.jit(&Endless.run/1, server: worker).(Nx.tensor(0.0))
        end

      assert error.class == "Timeout"
      assert error.message =~ "300 ms"

      Application.put_env(:nx_jax, :timeout, -5)

      assert_raise ArgumentError, ~r/config :nx_jax, timeout: must be a positive integer/, fn ->
        NxJax.Pool.reload_config()
      end
    after
      case before do
        {:ok, value} -> Application.put_env(:nx_jax, :timeout, value)
        :error -> Application.delete_env(:nx_jax, :timeout)
      end

      NxJax.Pool.reload_config()
    end

    assert NxJax.Worker.default_timeout() == 60_000
    assert NxJax.Worker.call(:ping, []) == :pong
  end

  test "config :nx_jax, debug_nans: true sets the option of every defn call" do
    defaults = Application.get_env(:nx, :default_defn_options, [])
    ratio = fn x -> Nx.divide(x, Nx.add(1, Nx.sqrt(x))) end

    try do
      Application.put_env(:nx_jax, :debug_nans, true)
      NxJax.Pool.reload_config()
      assert Nx.Defn.default_options()[:debug_nans] == true

      error =
        assert_raise NxJax.WorkerError, fn ->
          Nx.Defn.jit(fn x -> Nx.Defn.grad(x, ratio) end).(0.0)
        end

      assert error.class == "NonFinite" and error.message =~ "the gradient rule of sqrt"
      # a call may still turn it off
      nan = Nx.Defn.jit(fn x -> Nx.Defn.grad(x, ratio) end, debug_nans: false).(0.0)
      assert Nx.to_number(nan) == :nan

      Application.put_env(:nx_jax, :debug_nans, :yes)

      assert_raise ArgumentError, ~r/debug_nans: expects a boolean, got: :yes/, fn ->
        NxJax.Pool.reload_config()
      end
    after
      Application.delete_env(:nx_jax, :debug_nans)
      Nx.Defn.global_default_options(defaults)
      NxJax.Pool.reload_config()
    end
  end

  test "the global defn options are Nx's, read once; global_default_options/1 applies changes, " <>
         "reload_config/0 leaves them alone" do
    defaults = Application.get_env(:nx, :default_defn_options, [])

    try do
      assert Nx.Defn.default_options() == defaults
      # a change of the environment alone is not seen (it is read once) ...
      Application.put_env(:nx, :default_defn_options, compiler: Nx.Defn.Evaluator, timeout: 1)
      assert Nx.Defn.default_options() == defaults
      # ... and nx_jax's reload_config/0 neither reads nor overwrites Nx's settings (it once
      # put [] over them, erasing a user's `config :nx, default_defn_options: [compiler: EXLA]`)
      NxJax.Pool.reload_config()
      assert Nx.Defn.default_options() == defaults

      assert Application.get_env(:nx, :default_defn_options) ==
               [compiler: Nx.Defn.Evaluator, timeout: 1]

      # Nx's own function applies a change
      assert Nx.Defn.global_default_options(timeout: 62_000) ==
               [compiler: Nx.Defn.Evaluator, timeout: 1]

      assert Nx.Defn.default_options() == [timeout: 62_000]
      assert Application.get_env(:nx, :default_defn_options) == [timeout: 62_000]
      # a process's own defaults still come first
      assert Task.await(
               Task.async(fn -> Nx.Defn.default_options([]) && Nx.Defn.default_options() end)
             ) == []
    after
      Nx.Defn.global_default_options(defaults)
    end

    assert Nx.Defn.default_options() == defaults
  end

  test "pool_size: :per_device gives worker i device i; on CUDA only its own GPU is visible" do
    before = Application.get_env(:nx_jax, :platform)
    opts = [name: :w, env: [{"XLA_FLAGS", "x"}]]

    try do
      Application.delete_env(:nx_jax, :platform)
      assert NxJax.Pool.per_device(opts, 2) == [{:device, 2} | opts]
      Application.put_env(:nx_jax, :platform, "cuda")

      assert NxJax.Pool.per_device(opts, 2) ==
               [device: 0, name: :w, env: [{"XLA_FLAGS", "x"}, {"CUDA_VISIBLE_DEVICES", "2"}]]
    after
      if before,
        do: Application.put_env(:nx_jax, :platform, before),
        else: Application.delete_env(:nx_jax, :platform)
    end
  end
end
