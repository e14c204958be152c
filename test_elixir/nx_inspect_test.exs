defmodule NxJax.NxInspectTest do
  # How tensors print, checked against real Nx 0.7.2's text (from its doc examples):
  # alone and inside lists, tuples and maps, where their lines are indented with the
  # container's items.
  use ExUnit.Case, async: true

  test "a tensor alone" do
    assert inspect(Nx.tensor([1, 2, 3])) == """
           #Nx.Tensor<
             s64[3]
             [1, 2, 3]
           >\
           """
  end

  test "tensors inside a list, a tuple and a map are indented with the items" do
    x = Nx.tensor([1, 2, 3])

    assert inspect([x, {x, %{a: x}}]) == """
           [#Nx.Tensor<
               s64[3]
               [1, 2, 3]
             >, {#Nx.Tensor<
                s64[3]
                [1, 2, 3]
              >, %{a: #Nx.Tensor<
                  s64[3]
                  [1, 2, 3]
                >}}]\
           """
  end

  test "vectorized tensors in a list (Nx.reshape_vectors/2's doc example)" do
    x = Nx.tensor([1, 2, 3]) |> Nx.vectorize(:x)
    y = Nx.tensor([4]) |> Nx.vectorize(:y)

    assert inspect(Nx.reshape_vectors([x, y])) == """
           [#Nx.Tensor<
               vectorized[x: 3][y: 1]
               s64
               [
                 [1],
                 [2],
                 [3]
               ]
             >, #Nx.Tensor<
               vectorized[x: 1][y: 1]
               s64
               [
                 [4]
               ]
             >]\
           """
  end
end
