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

  describe "atoms from the wire" do
    # names that are no atom of this node (checked by each test)
    defp unknown_names, do: for(i <- 1..1_000, do: "nx_jax_never_an_atom_#{i}")

    defp refute_atom(name),
      do: assert_raise(ArgumentError, fn -> String.to_existing_atom(name) end)

    test "a reply naming atoms this node does not have is refused under its id, none made" do
      names = unknown_names()
      for name <- names, do: refute_atom(name)

      # {:r, id, unknown} as the worker would write it (SMALL_ATOM_UTF8_EXT), and a frame above
      # 64 KiB, which NxJax.Wire decodes itself: {:e, id, {data, unknown}} (ATOM_EXT)
      small = for {name, id} <- Enum.with_index(names), do: {id, small_reply(id, name)}

      big =
        for {name, id} <- Enum.with_index(names) do
          {id,
           <<131, 104, 3, 115, 1, ?e, 98, id::32, 104, 2, 109, 70_000::32,
             0::size(70_000)-unit(8), 100, byte_size(name)::16, name::binary>>}
        end

      before = :erlang.system_info(:atom_count)
      decoded = for {id, frame} <- small ++ big, do: {id, NxJax.Wire.decode_reply(frame)}
      made = :erlang.system_info(:atom_count) - before

      for {id, reply} <- decoded do
        assert {^id, {:error, {"BadReply", message, ""}}} = reply
        assert message =~ "naming an atom this node does not have"
      end

      # (other tests may make atoms meanwhile: not 1,000 of them)
      assert made < 1_000
      for name <- names, do: refute_atom(name)
    end

    test "a frame that gives no reply id is refused as a bad frame" do
      [name | _] = unknown_names()
      log = <<131, 104, 3, 119, 3, "log", 119, byte_size(name), name::binary, 109, 0::32>>
      assert {:bad_frame, message} = NxJax.Wire.decode_reply(log)
      assert message =~ "cannot be decoded"
      assert {:bad_frame, _} = NxJax.Wire.decode_reply(<<131, 104, 3, 119, 1, ?r, 119>>)
      refute_atom(name)
    end

    test "the worker's GenServer logs a bad frame and serves on, its Python process the same" do
      w = start_worker()
      os_pid = NxJax.Worker.os_pid(w)
      %{port: port} = :sys.get_state(w)
      [name | _] = unknown_names()

      log =
        ExUnit.CaptureLog.capture_log(fn ->
          send(w, {port, {:data, <<131, 104, 2, 119, byte_size(name), name::binary, 97, 1>>}})
          send(w, {port, {:data, small_reply(123_456, name)}})
          assert NxJax.Worker.call(:ping, [], server: w) == :pong
        end)

      assert log =~ "cannot be decoded"
      assert log =~ "replied to unknown request 123456"
      assert NxJax.Worker.os_pid(w) == os_pid
      refute_atom(name)
    end

    test "every atom the worker writes is one NxJax.Wire.reply_atoms/0 names" do
      source = fn file -> File.read!(Path.join("py_backend", file)) end
      # atom("...") in py_backend, doctest lines aside; Nx's type kinds; the log streams
      literals =
        for file <- File.ls!("py_backend"),
            String.ends_with?(file, ".py"),
            line <- String.split(source.(file), "\n"),
            not Regex.match?(~r/^\s*(>>>|\.\.\.)/, line),
            [_, name] <- Regex.scan(~r/\batom\("(\w+)"\)/, line),
            do: name

      kinds = for [_, kind] <- Regex.scan(~r/NxType\("(\w+)"/, source.("nxtypes.py")), do: kind
      [streams] = Regex.run(~r/^STREAMS = (.*)$/m, source.("stdio.py"), capture: :all_but_first)
      streams = for [_, stream] <- Regex.scan(~r/"(\w+)"/, streams), do: stream
      assert "peak_rss" in literals and "bf" in kinds and "stderr" in streams

      # the served functions, info's, stats' and memory's keys, from a worker serving all
      w = start_worker(env: [{"NX_JAX_TEST", "1"}])
      info = NxJax.Worker.call(:info, [], server: w)
      assert :debug_print in info.functions

      from_worker =
        info.functions ++
          Map.keys(info) ++
          Map.keys(NxJax.Worker.call(:stats, [], server: w)) ++
          Map.keys(NxJax.Worker.call(:memory, [false], server: w))

      names = Enum.uniq(literals ++ kinds ++ streams ++ Enum.map(from_worker, &Atom.to_string/1))
      known = Enum.map(NxJax.Wire.reply_atoms(), &Atom.to_string/1)
      assert names -- known == []
      assert Enum.sort(known) == Enum.sort(names)
    end
  end

  defp small_reply(id, name),
    do: <<131, 104, 3, 119, 1, ?r, 98, id::32, 119, byte_size(name), name::binary>>

  test "pool stats carry the fast-path counters" do
    stats = NxJax.Pool.stats()
    for key <- @fast, do: assert(is_integer(Map.fetch!(stats, key)), "#{key}")
  end
end
