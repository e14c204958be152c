defmodule NxJax.DefnStreamTest do
  # Nx.Defn.stream/3: each send runs one jitted step on the worker, recv returns the outputs
  # in order, done the accumulator (the behaviour of Nx 0.7.2's stream_test.exs).
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)
  import Nx.Defn
  alias NxJax.ContainerTest.{Layer, Lazy, Pair}

  defn running_sum(x, acc), do: {acc, acc + x}
  defn scaled_sum(x, acc, a, b), do: {acc * a, acc + x * b}

  @tag :seam
  test "steps run in order; recv gives each output, done the accumulator" do
    stream = Nx.Defn.stream(&running_sum/2, [Nx.template({}, :s64), 0])
    assert Nx.Stream.send(stream, 1) == :ok
    assert Nx.Stream.send(stream, 2) == :ok
    assert Nx.Stream.recv(stream) == Nx.tensor(0)
    assert Nx.Stream.recv(stream) == Nx.tensor(1)
    assert Nx.Stream.send(stream, 4) == :ok
    assert Nx.Stream.recv(stream) == Nx.tensor(3)
    assert Nx.Stream.done(stream) == Nx.tensor(7)
  end

  @tag :seam
  test "the arguments after the accumulator reach every step" do
    stream = Nx.Defn.stream(&scaled_sum/4, [0.0, 0.0, 10.0, 2.0])
    Nx.Stream.send(stream, 1.0)
    assert Nx.Stream.recv(stream) == Nx.tensor(0.0)
    Nx.Stream.send(stream, 3.0)
    assert Nx.Stream.recv(stream) == Nx.tensor(20.0)
    assert Nx.Stream.done(stream) == Nx.tensor(8.0)
  end

  @tag :seam
  test "containers as input, output and accumulator; numbers become tensors" do
    # as in Nx 0.7.2, each output has the accumulator's template
    step = fn %{a: a, b: b}, {s, p} ->
      {{Nx.add(a, b), Nx.multiply(a, b)}, {Nx.add(s, a), Nx.multiply(p, b)}}
    end

    stream = Nx.Defn.stream(step, [%{a: 0.0, b: 0.0}, {0.0, 1.0}])
    Nx.Stream.send(stream, %{a: 2.0, b: 3.0})
    assert Nx.Stream.recv(stream) == {Nx.tensor(5.0), Nx.tensor(6.0)}
    Nx.Stream.send(stream, %{a: 1.0, b: 4.0})
    assert Nx.Stream.recv(stream) == {Nx.tensor(5.0), Nx.tensor(4.0)}
    assert Nx.Stream.done(stream) == {Nx.tensor(3.0), Nx.tensor(12.0)}

    assert Nx.Stream.done(Nx.Defn.stream(fn _, _ -> {0, 0} end, [1, {2, 3}])) ==
             {Nx.tensor(2), Nx.tensor(3)}
  end

  @tag :seam
  test "a struct's kept fields are those of the first argument, not of the data sent" do
    step = fn %Layer{w: w, b: b, activation: activation}, acc ->
      y = if activation == :tanh, do: Nx.tanh(Nx.add(w, b)), else: Nx.add(w, b)
      {Nx.sum(y), Nx.add(acc, Nx.sum(y))}
    end

    first = %Layer{w: Nx.tensor([[0.0]]), b: Nx.tensor([0.0]), activation: :linear}
    stream = Nx.Defn.stream(step, [first, 0.0])
    # the data sent says :tanh; the stream was started with :linear (as in Nx 0.7.2)
    Nx.Stream.send(stream, %Layer{w: Nx.tensor([[1.0]]), b: Nx.tensor([1.0]), activation: :tanh})
    assert Nx.Stream.recv(stream) == Nx.tensor(2.0)
    assert Nx.Stream.done(stream) == Nx.tensor(2.0)
  end

  @tag :seam
  test "a lazy container sent makes only the tensors the step reads" do
    step = fn %Pair{left: left}, acc -> {acc, Nx.add(acc, left)} end
    stream = Nx.Defn.stream(step, [%Lazy{left: 0.0, right: 0.0, owner: self()}, 0.0])
    Nx.Stream.send(stream, %Lazy{left: 2.0, right: 5.0, owner: self()})
    assert Nx.Stream.recv(stream) == Nx.tensor(0.0)
    assert Nx.Stream.done(stream) == Nx.tensor(2.0)
    assert_received {:made, :left}
    refute_received {:made, :right}
  end

  @tag :seam
  test "a recv made before the send waits for it" do
    stream = Nx.Defn.stream(&running_sum/2, [0, 5])
    task = Task.async(fn -> Nx.Stream.recv(stream) end)
    refute Task.yield(task, 50)
    Nx.Stream.send(stream, 1)
    assert Task.await(task, 60_000) == Nx.tensor(5)
  end

  @tag :seam
  test "incompatible inputs and outputs raise with the templates" do
    stream = Nx.Defn.stream(fn _, _ -> {0, 0} end, [1, {2, 3}])

    assert_raise ArgumentError,
                 ~r/Nx stream expected a tensor of type, shape, and names on send/,
                 fn ->
                   Nx.Stream.send(stream, Nx.iota({3}))
                 end

    # with no compiler named (Nx's default, Nx.Defn.Evaluator) each output is checked against
    # the accumulator's template, as in Nx 0.7.2 ...
    step = fn _a, {b, c} -> {b, c} end
    stream = Nx.Defn.stream(step, [1, {2, 3}])
    Nx.Stream.send(stream, Nx.tensor(1))

    assert_raise ArgumentError,
                 ~r/Nx stream expected a tensor of type, shape, and names on recv/,
                 fn ->
                   Nx.Stream.recv(stream)
                 end

    # ... under compiler: NxJax (as EXLA's, and NxJax's under real Nx) against the step's output
    stream = Nx.Defn.stream(step, [1, {2, 3}], compiler: NxJax)
    Nx.Stream.send(stream, Nx.tensor(1))
    assert Nx.Stream.recv(stream) == Nx.tensor(2)
  end

  @tag :seam
  test "done refuses while outputs wait to be received; a done stream is gone" do
    stream = Nx.Defn.stream(&running_sum/2, [0, 0], compiler: NxJax)
    Nx.Stream.send(stream, 1)

    assert_raise RuntimeError,
                 "cannot mark stream as done when there are recv messages pending",
                 fn ->
                   Nx.Stream.done(stream)
                 end

    assert Nx.Stream.recv(stream) == Nx.tensor(0)
    assert Nx.Stream.done(stream) == Nx.tensor(1)

    assert_raise RuntimeError, "cannot recv from stream because it has been terminated", fn ->
      Nx.Stream.recv(stream)
    end

    # (with no compiler named it exits, as Nx 0.7.2's evaluator's)
    stream = Nx.Defn.stream(&running_sum/2, [0, 0])
    assert Nx.Stream.done(stream) == Nx.tensor(0)
    assert {:noproc, _} = catch_exit(Nx.Stream.done(stream))
  end

  @tag :seam
  test "a step that does not return a pair: an error at once (NxJax), or at the send" do
    assert_raise ArgumentError,
                 ~r/must return a tuple {output, accumulator}, got: #Nx.Tensor/,
                 fn ->
                   Nx.Defn.stream(fn _, _ -> 0 end, [1, 2], compiler: NxJax)
                 end

    Process.flag(:trap_exit, true)
    stream = Nx.Defn.stream(fn _, _ -> 0 end, [1, 2])
    ref = Process.monitor(stream.pid)
    Nx.Stream.send(stream, 1)
    assert catch_exit(Nx.Stream.recv(stream))
    assert_receive {:DOWN, ^ref, _, _, {%ArgumentError{message: message}, _}}, 60_000
    assert message =~ "must return a tuple {output, accumulator}, got: #Nx.Tensor"
  end

  test "bad arguments raise at once" do
    assert_raise ArgumentError, "Nx.Defn.stream/3 expects at least two arguments", fn ->
      Nx.Defn.stream(fn x -> x end, [1])
    end

    assert_raise ArgumentError, ":hooks option must be a map", fn ->
      Nx.Defn.stream(&running_sum/2, [0, 0], hooks: [])
    end

    assert_raise ArgumentError, ~r/given 3 arguments for a function of arity 2/, fn ->
      Nx.Defn.stream(&running_sum/2, [0, 0, 1])
    end
  end

  test "to_backend/1 names the backend of results" do
    assert Nx.Defn.to_backend() == {Nx.BinaryBackend, []}

    assert Nx.with_default_backend(NxJax.Backend, fn -> Nx.Defn.to_backend([]) end) ==
             {NxJax.Backend, []}

    assert_raise ArgumentError, ":hooks option must be a map", fn ->
      Nx.Defn.to_backend(hooks: [])
    end
  end
end
