defmodule NxJax.WireTest do
  # The wire's fast paths on both sides (NxJax.Wire, py_backend/fastcall.py) and their counters.
  use ExUnit.Case, async: true
  doctest NxJax.Wire

  # exp of an f32 vector of two, and of two vectors (two results)
  @exp :erlang.term_to_binary(
         {:nx_jax_graph, 1,
          [
            {0, :parameter, [], %{index: 0}, {{:f, 32}, {2}}},
            {1, :exp, [0], %{}, {{:f, 32}, {2}}}
          ], [1]}
       )
  @exp2 :erlang.term_to_binary(
          {:nx_jax_graph, 1,
           [
             {0, :parameter, [], %{index: 0}, {{:f, 32}, {2}}},
             {1, :parameter, [], %{index: 1}, {{:f, 32}, {2}}},
             {2, :exp, [0], %{}, {{:f, 32}, {2}}},
             {3, :exp, [1], %{}, {{:f, 32}, {2}}}
           ], [2, 3]}
        )
  @ones {{:f, 32}, {2}, <<1.0::float-32-native, 1.0::float-32-native>>}
  @fast [:fast_one_calls, :fast_hot_calls, :fast_layout_calls, :fast_replies, :lent_calls]

  defp start_worker(opts \\ []) do
    name = :"wire_#{System.unique_integer([:positive])}"
    start_supervised!({NxJax.Worker, [name: name] ++ opts}, id: name)
    name
  end

  defp fast_counts(w), do: Map.take(NxJax.Worker.stats(server: w), @fast)

  defp run(w, graph, args),
    do: NxJax.Worker.run_cached(NxJax.Worker.graph_key(graph), graph, args, false, server: w)

  defp e, do: <<:math.exp(1.0)::float-32-native>>

  test "a loop of one small call is served by the fast paths of both sides, counted" do
    w = start_worker()
    assert Map.values(fast_counts(w)) |> Enum.all?(&(&1 == 0))

    for _ <- 1..30 do
      assert [{{:f, 32}, {2}, data}] = run(w, @exp, [@ones])
      assert data == e() <> e()
    end

    c = fast_counts(w)
    # the first call carries the graph, the second is learned; every later one is byte-matched
    # (the one-in one-out path once its layout is the hot one)
    assert c.fast_one_calls + c.fast_hot_calls + c.fast_layout_calls >= 27
    assert c.fast_one_calls >= 25
    # every call after the first borrows the port, and its reply is read from its bytes
    assert c.lent_calls >= 28
    assert c.fast_replies == c.lent_calls
  end

  test "two results: the hot path (not the one-in one-out path) serves the loop" do
    w = start_worker()

    for _ <- 1..20 do
      assert [{_, {2}, a}, {_, {2}, b}] = run(w, @exp2, [@ones, @ones])
      assert a == e() <> e() and b == a
    end

    c = fast_counts(w)
    assert c.fast_one_calls == 0
    assert c.fast_hot_calls + c.fast_layout_calls >= 17
    assert c.fast_replies == c.lent_calls and c.lent_calls >= 18
  end

  test "without the lent port the replies go through the GenServer's decoder" do
    w = start_worker(lend_port: false)
    for _ <- 1..10, do: assert([{_, {2}, _}] = run(w, @exp, [@ones]))
    c = fast_counts(w)
    assert c.lent_calls == 0 and c.fast_replies == 0
    assert c.fast_one_calls + c.fast_hot_calls + c.fast_layout_calls >= 7
  end

  test "fast_reply/2 reads only the common reply of its own id, as the worker encodes it" do
    {_, _, data} = @ones
    # {:r, 5, [{{:f, 32}, {2}, data}]} with its atoms as SMALL_ATOM_EXT (py_backend/channel.py)
    tensor = <<104, 3, 104, 2, 115, 1, ?f, 97, 32, 104, 1, 97, 2, 109, 8::32>> <> data
    frame = <<131, 104, 3, 115, 1, ?r, 97, 5, 108, 1::32>> <> tensor <> <<106>>
    assert :erlang.binary_to_term(frame) == {:r, 5, [@ones]}
    assert NxJax.Wire.fast_reply(frame, 5) == {5, {:ok, [@ones]}}
    assert NxJax.Wire.fast_reply(frame, 6) == nil
    # Erlang's own encoding (SMALL_ATOM_UTF8_EXT) is not the fast path's, but decodes the same
    erlang = :erlang.term_to_binary({:r, 5, [@ones]})
    assert NxJax.Wire.fast_reply(erlang, 5) == nil
    assert NxJax.Wire.lent_reply(erlang, 5) == {5, {:ok, [@ones]}}
    assert NxJax.Wire.fast_reply(:erlang.term_to_binary({:r, 5, :pong}), 5) == nil
    assert NxJax.Wire.lent_reply(:erlang.term_to_binary({:r, 5, :pong}), 5) == {5, {:ok, :pong}}
  end

  test "args_body/1 gives the bytes term_to_binary writes, for every kind of argument list" do
    types =
      [{:f, 16}, {:f, 32}, {:f, 64}, {:bf, 16}, {:c, 64}, {:c, 128}] ++
        for(k <- [:s, :u], b <- [2, 4, 8, 16, 32, 64], do: {k, b})

    shapes = [{}, {0}, {1}, {255}, {256}, {65_535, 2}, {70_000, 1, 3}, {2_147_483_647}]
    datas = ["", <<1, 2, 3>>, :binary.copy(<<7>>, 300)]

    lists =
      for(t <- types, s <- shapes, d <- datas, do: [{t, s, d}]) ++
        [
          [{{:f, 32}, {2}, <<0::64>>}, {{:s, 64}, {}, <<5::64>>}, {{:u, 8}, {3, 1}, <<1, 2, 3>>}],
          # not wire tensors: term_to_binary writes them (the same function's answer)
          [],
          [{:ref, 123}],
          [{{:f, 32}, {}, <<0::32>>}, {:ref, 7}],
          [{{:f, 32}, {2_147_483_648}, <<>>}],
          [{{:f, 32}, {-1}, <<>>}],
          [{{:f, 32}, List.to_tuple(List.duplicate(1, 256)), <<>>}],
          [{{:f, 300}, {}, <<>>}],
          [{{:other, 32}, {}, <<>>}],
          [{{:f, 32}, [2], <<>>}],
          [{{:f, 32}, {}, <<1::3>>}],
          [1.5, :atom]
        ]

    for args <- lists do
      body = IO.iodata_to_binary(NxJax.Wire.args_body(args))
      assert body == NxJax.Wire.small_body(args), inspect(args, limit: 5)
      assert :erlang.binary_to_term(<<131, body::binary>>) == args
    end
  end

  test "pool stats carry the fast-path counters" do
    stats = NxJax.Pool.stats()
    for key <- @fast, do: assert(is_integer(Map.fetch!(stats, key)), "#{key}")
  end
end
