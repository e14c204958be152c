# Cases of shapes given as numbers and of values that are not tensors where a tensor is
# expected: real Nx 0.7.2's answers are in nx_0.7.2_inputs.tsv (written by
# nx_inputs_reference.exs), ours are compared with them by test_elixir/nx_creation_test.exs.
# Written against Nx 0.7.2's public API only; required by both sides.
defmodule NxInputsCases do
  import Nx.Defn

  defn add2(a, b), do: a + b

  def cases do
    [
      {"broadcast_number_shape", fn -> Nx.broadcast(0, 12) end},
      {"broadcast_float_number_shape", fn -> Nx.broadcast(1.5, 3) end},
      {"broadcast_tensor_number_shape", fn -> Nx.broadcast(Nx.tensor([1, 2]), 5) end},
      {"reshape_number_shape", fn -> Nx.reshape(Nx.tensor([7]), 5) end},
      {"iota_number_shape", fn -> Nx.iota(5) end},
      {"broadcast_list_shape", fn -> Nx.broadcast(0, [2]) end},
      {"add_list", fn -> Nx.add([1, 2], 1) end},
      {"add_tensor_list", fn -> Nx.add(Nx.tensor(1), [1, 2]) end},
      {"add_string", fn -> Nx.add("abc", 1) end},
      {"add_atom", fn -> Nx.add(:foo, 1) end},
      {"sum_list", fn -> Nx.sum([1, 2]) end},
      {"defn_list", fn -> add2([1, 2], 1) end},
      {"defn_tensor_list", fn -> add2(Nx.tensor(1.0), [1.0]) end},
      {"defn_string", fn -> add2("abc", 1) end}
    ]
  end

  # one line: the name, then the result's type, shape and flat values, or the error's module
  # and message (up to the list of the protocol's implementations, which depends on the
  # project that compiled the protocols)
  def line({name, fun}) do
    line =
      try do
        r = fun.()
        type = Nx.Type.to_string(r.type)
        "#{name}\tok\t#{type}\t#{inspect(r.shape)}\t#{inspect(Nx.to_flat_list(r))}"
      rescue
        e ->
          message = e |> Exception.message() |> String.split(" This protocol is implemented")
          "#{name}\terror\t#{inspect(e.__struct__)}\t#{hd(message)}"
      end

    String.replace(line, "\n", " ")
  end
end
