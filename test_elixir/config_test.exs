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
end
