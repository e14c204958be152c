defmodule NxJax.NumericsTest do
  # `config :nx_jax, numerics:` (py_backend/numerics.py): :nx (this project's tests run in it,
  # config/config.exs) rounds f32 transcendental functions as Nx's binary backend does and
  # differentiates them by Nx's formulas; :native, the default elsewhere, keeps XLA's own f32
  # math. Changes the application environment: not async.
  use ExUnit.Case, async: false

  import Nx.Defn

  defn product_rule(t), do: Nx.tanh(Nx.tanh(Nx.multiply(Nx.pow(t, 2), Nx.pow(t, 3))))
  defn chain_rule(t), do: Nx.tanh(Nx.exp(t))
  defn division_rule(t), do: Nx.divide(Nx.tanh(t), t)
  defn atan2_rule(t), do: Nx.atan2(Nx.tanh(t), t)

  # Nx 0.7.2's grad_test.exs asserts these with ==; before mode :nx the worker gave other last
  # bits for each (1.2343395948410034, 0.04693630710244179, -0.3416198790073395, ...)
  test "gradients are Nx's to the last bit" do
    assert Nx.Defn.grad(Nx.tensor(1.0), &product_rule/1) == Nx.tensor(1.2343397629215758)
    assert Nx.Defn.grad(Nx.tensor(1.0), &chain_rule/1) == Nx.tensor(0.046936701983213425)
    assert Nx.Defn.grad(Nx.tensor(1.0), &division_rule/1) == Nx.tensor(-0.3416198492050171)
    assert Nx.Defn.grad(Nx.tensor(1.0), &atan2_rule/1) == Nx.tensor(-0.21621156120382867)

    assert Nx.Defn.grad(Nx.tensor(1.0), &Nx.Defn.grad(&1, fn t -> Nx.tanh(t) end)) ==
             Nx.tensor(-0.6397000084492246)
  end

  # as Nx's binary backend computes them: the function on the double of each f32 value,
  # rounded to f32 once
  test "f32 transcendental functions print Nx's digits" do
    x = Nx.tensor([0.1, 0.7, 1.3, 2.9])
    assert Nx.to_flat_list(Nx.exp(x)) == Enum.map([0.1, 0.7, 1.3, 2.9], &f32(:math.exp(f32(&1))))

    assert Nx.to_flat_list(Nx.tanh(x)) ==
             Enum.map([0.1, 0.7, 1.3, 2.9], &f32(:math.tanh(f32(&1))))
  end

  # real Nx 0.7.2's answers: its binary backend adds f32 numbers as doubles, rounds the sum
  # once, and divides correctly rounded (XLA would multiply by the reciprocal of the 3); the
  # worker's dot sums in f32 (docs/COMPATIBILITY.md "Numerics"), but covariance asks for doubles
  test "sums, means, covariances and divisions by a number are Nx's" do
    t = Nx.tensor([1.0e8, 1.0, -1.0e8])
    assert Nx.to_number(Nx.sum(t)) == 1.0
    assert Nx.to_number(Nx.mean(t)) == 0.3333333432674408
    assert Nx.window_sum(t, {3}) == Nx.tensor([1.0])
    assert Nx.to_number(Nx.product(Nx.tensor([1.0e20, 1.0e20, 1.0e-30]))) == 1.0e10
    assert Nx.to_number(Nx.divide(Nx.tensor(4.666666507720947), 3)) == 1.5555554628372192
    assert Nx.mean(Nx.tensor([16_777_217, 3, 1])) == Nx.tensor(5_592_407.0)

    assert Nx.covariance(Nx.tensor([[4, 5], [2, 3], [1, 0]])) ==
             Nx.tensor([
               [1.5555554628372192, 2.444444417953491],
               [2.444444417953491, 4.222222328186035]
             ])

    assert Nx.window_mean(Nx.tensor([0.1, 0.2, 0.7, 0.3]), {3}) ==
             Nx.tensor([0.3333333432674408, 0.4000000059604645])
  end

  test "a worker in mode :native uses XLA's f32 math; an unknown mode is refused" do
    native = start_supervised!({NxJax.Worker, env: [{"NX_JAX_NUMERICS", "native"}]})
    x = Nx.linspace(-3.0, 3.0, n: 4096)
    doubled = x |> Nx.as_type(:f64) |> Nx.tanh() |> Nx.as_type(:f32)
    assert Nx.tanh(x) == doubled
    assert Nx.Defn.jit(&Nx.tanh/1, server: native).(x) != doubled

    previous = Application.get_env(:nx_jax, :numerics)

    try do
      Application.put_env(:nx_jax, :numerics, :fast)
      Process.flag(:trap_exit, true)

      assert {:error, {%ArgumentError{message: message}, _}} = NxJax.Worker.start_link([])
      assert message =~ "config :nx_jax, numerics: must be one of [:nx, :native], got: :fast"
    after
      if previous,
        do: Application.put_env(:nx_jax, :numerics, previous),
        else: Application.delete_env(:nx_jax, :numerics)
    end
  end

  test "the default mode is :native, unless the config or NX_JAX_NUMERICS says otherwise" do
    # (this project's config/config.exs sets :nx for its own tests)
    assert Application.get_env(:nx_jax, :numerics) == :nx
    previous_env = System.get_env("NX_JAX_NUMERICS")

    try do
      Application.delete_env(:nx_jax, :numerics)
      System.delete_env("NX_JAX_NUMERICS")
      assert NxJax.Worker.Server.default_numerics() == :native
      System.put_env("NX_JAX_NUMERICS", "nx")
      assert NxJax.Worker.Server.default_numerics() == :nx
      Application.put_env(:nx_jax, :numerics, :native)
      assert NxJax.Worker.Server.default_numerics() == :native

      # a worker started now computes as XLA does
      Application.delete_env(:nx_jax, :numerics)
      System.delete_env("NX_JAX_NUMERICS")
      native = start_supervised!({NxJax.Worker, []})
      x = Nx.linspace(-3.0, 3.0, n: 4096)
      doubled = x |> Nx.as_type(:f64) |> Nx.tanh() |> Nx.as_type(:f32)
      assert Nx.Defn.jit(&Nx.tanh/1, server: native).(x) != doubled
    after
      Application.put_env(:nx_jax, :numerics, :nx)
      if previous_env, do: System.put_env("NX_JAX_NUMERICS", previous_env)
    end
  end

  defp f32(x), do: x |> Nx.tensor(type: :f32) |> Nx.to_number()
end
