# Prints what REAL Nx 0.7.2 answers for tensor[index] with a tensor of indices (the values
# test_elixir/nx_access_test.exs checks, "a tensor of indices ..."). Not run by our suites;
# run against a build of Nx 0.7.2 (../shared/reference/build-real-nx.sh DIR):
#
#     cd DIR/nx-0.7.2/nx && mix run /ABSOLUTE/PATH/TO/test_elixir/reference/nx_access_reference.exs
#
# Each line: a case name, then the result's type, shape and flat values, or the error's
# module and message.
"0.7.2" = to_string(Application.spec(:nx, :vsn))

t = Nx.iota({4, 2})
v = Nx.vectorize(Nx.tensor([[0, 1], [2, 3]]), :x)

cases = [
  {"rows", fn -> t[Nx.tensor([3, 0])] end},
  {"rows_2d", fn -> t[Nx.tensor([[3, 0], [1, 1]])] end},
  {"rows_u8", fn -> t[Nx.tensor([2, 1], type: :u8)] end},
  {"in_jit", fn -> Nx.Defn.jit(fn t, i -> t[i] end).(t, Nx.tensor([1, 2])) end},
  {"vectorized", fn -> t[v] |> Nx.devectorize() end},
  {"in_list", fn -> t[[Nx.tensor([3, 0]), 0]] end},
  {"in_keyword", fn -> Nx.rename(t, [:a, :b])[a: Nx.tensor([1, 0])] end},
  {"float", fn -> t[Nx.tensor([1.0])] end},
  {"out_of_bounds", fn -> t[Nx.tensor([7])] end}
]

for {name, fun} <- cases do
  line =
    try do
      r = fun.()

      "#{name}\tok\t#{Nx.Type.to_string(r.type)}\t#{inspect(r.shape)}\t#{inspect(Nx.to_flat_list(r))}"
    rescue
      e -> "#{name}\terror\t#{inspect(e.__struct__)}\t#{Exception.message(e)}"
    end

  IO.puts(String.replace(line, "\n", " "))
end
