# Where the process hops of the small call go (issue #4): `mix run bench/hops.exs [ROUNDS]`.
# The same request bytes (the small defn's key-only call, taken from the worker's port with a
# trace) go to our Python worker five ways, each caller polling for its reply as nx_jax's does:
#   own_port       the caller owns the port (no process between it and Python)
#   own_port_new_ids  the same, each request with a new id (as the GenServer numbers them)
#   caller_writes  a bare forwarding process owns the port and sends each reply on to the
#                  caller, which writes its requests to the port itself (`Port.command/2`)
#   borrowed       the caller borrows that forwarder's port for its call, as NxJax.Worker's lent
#                  calls do: it connects the port to itself (the port message
#                  `{owner, {:connect, pid}}`, whose `{port, :connected}` answer wakes the
#                  forwarder), writes, takes the reply and connects the port back
#   fwd_writes     the caller sends each request to that forwarding process, which writes it
#   fwd_writes_monitored  the same, the caller monitoring the forwarder during each call (as
#                  GenServer.call does; NxJax.Worker monitors only once it stops polling)
#   genserver_fwd_writes  fwd_writes with the forwarder written as a GenServer
#   run_cached     `NxJax.Worker.run_cached/5` with the same wire arguments (our GenServer)
#   defn           the defn itself (the front end on top of run_cached)
# p50 in us of 4 interleaved rounds of 2000 calls each, per run. Not a test: nothing here
# asserts a timing.
Code.require_file("lib.exs", __DIR__)

# the bare forwarder as a GenServer (NxJax.Worker is one)
defmodule Hops.GenServerForwarder do
  use GenServer

  @impl true
  def init({caller, open}) do
    port = open.()
    send(caller, {:hops_port, port})
    {:ok, %{port: port, caller: caller}}
  end

  @impl true
  def handle_info({:write, bytes}, state) do
    Port.command(state.port, bytes)
    {:noreply, state}
  end

  def handle_info({port, {:data, _}} = reply, %{port: port} = state) do
    send(state.caller, reply)
    {:noreply, state}
  end
end

defmodule Hops do
  # the bytes the worker's GenServer writes to its port while `fun` runs
  def capture(server, fun) do
    port = :sys.get_state(server).port
    :erlang.trace(port, true, [:receive, {:tracer, self()}])
    fun.()
    :erlang.trace(port, false, [:receive])

    receive do
      {:trace, ^port, :receive, {_, {:command, bytes}}} -> IO.iodata_to_binary(bytes)
    end
  end

  # our Python worker on a port of the calling process, as NxJax.Worker starts it
  def open_worker do
    spin = Integer.to_string(NxJax.Worker.spin_us())

    Port.open({:spawn_executable, Bench.python()}, [
      {:packet, 4},
      :binary,
      :nouse_stdio,
      {:args, ["-m", "py_backend", "--spin-us", spin]},
      {:cd, Path.expand("..", __DIR__)}
    ])
  end

  # owns a worker's port: writes what it is sent, sends every reply message on to `caller`
  # (who waits for it with Bench.await_polling/1, as for its own port)
  def forwarder(caller) do
    port = open_worker()
    send(caller, {:hops_port, port})
    forward(port, caller)
  end

  defp forward(port, caller) do
    receive do
      {:write, bytes} ->
        Port.command(port, bytes)
        forward(port, caller)

      {^port, {:data, _}} = reply ->
        send(caller, reply)
        forward(port, caller)

      {^port, :connected} ->
        forward(port, caller)
    end
  end

  # `k` samples of `request` written by the forwarding process `forwarder` of `port`
  def through(k, forwarder, port, request) do
    Bench.samples(k, fn ->
      send(forwarder, {:write, request})
      Bench.await_polling(port)
    end)
  end

  def run(n) do
    x = Nx.tensor(1.5)
    {:ok, _} = NxJax.Worker.start_link(name: :hops_worker)
    small = Nx.Defn.jit(&Bench.small/1, server: :hops_worker)
    graph_request = capture(:hops_worker, fn -> small.(x) end)
    key_request = capture(:hops_worker, fn -> small.(x) end)

    {graph_bin, key} = Bench.small_graph()
    wire = [NxJax.Backend.to_wire(x, :hops_worker)]
    own = open_worker()
    Bench.port_call(own, graph_request)
    me = self()
    fwd = spawn_link(fn -> forwarder(me) end)
    fwd_port = receive(do: ({:hops_port, port} -> port))
    send(fwd, {:write, graph_request})
    Bench.await_polling(fwd_port)
    {:ok, gen_fwd} = GenServer.start_link(Hops.GenServerForwarder, {me, &open_worker/0})
    gen_port = receive(do: ({:hops_port, port} -> port))
    send(gen_fwd, {:write, graph_request})
    Bench.await_polling(gen_port)

    # the same request with a new id each time (as the GenServer sends it), the id always
    # encoded in 32 bits, as from the 256th request on
    at = 3 + byte_size(:erlang.term_to_binary(:C)) - 1
    <<head::binary-size(at), 97, _id, tail::binary>> = key_request
    Process.put(:hops_id, 1_000)

    with_new_id = fn ->
      id = Process.put(:hops_id, Process.get(:hops_id) + 1)
      [head, <<98, id::32>>, tail]
    end

    rows = [
      own_port: fn k -> Bench.samples(k, fn -> Bench.port_call_polling(own, key_request) end) end,
      own_port_new_ids: fn k ->
        Bench.samples(k, fn -> Bench.port_call_polling(own, with_new_id.()) end)
      end,
      caller_writes: fn k ->
        Bench.samples(k, fn ->
          Port.command(fwd_port, key_request)
          Bench.await_polling(fwd_port)
        end)
      end,
      borrowed: fn k ->
        Bench.samples(k, fn ->
          send(fwd_port, {fwd, {:connect, me}})
          Port.command(fwd_port, key_request)
          reply = Bench.await_polling(fwd_port)
          :erlang.port_connect(fwd_port, fwd)
          reply
        end)
      end,
      fwd_writes: &through(&1, fwd, fwd_port, key_request),
      fwd_writes_monitored: fn k ->
        Bench.samples(k, fn ->
          tag = :erlang.monitor(:process, fwd, alias: :demonitor)
          send(fwd, {:write, key_request})
          reply = Bench.await_polling(fwd_port)
          Process.demonitor(tag, [:flush])
          reply
        end)
      end,
      genserver_fwd_writes: &through(&1, gen_fwd, gen_port, key_request),
      run_cached: fn k ->
        Bench.samples(k, fn ->
          NxJax.Worker.run_cached(key, graph_bin, wire, false, server: :hops_worker)
        end)
      end,
      defn: fn k -> Bench.samples(k, fn -> small.(x) end) end
    ]

    result = Bench.interleaved(rows, n)
    Bench.close_port(own)
    GenServer.stop(gen_fwd)
    result
  end
end

rounds = String.to_integer(List.first(System.argv()) || "1")

for _ <- 1..rounds do
  rows = Hops.run(8000)

  IO.puts(
    Enum.map_join(
      [
        :own_port,
        :own_port_new_ids,
        :caller_writes,
        :borrowed,
        :fwd_writes,
        :fwd_writes_monitored,
        :genserver_fwd_writes,
        :run_cached,
        :defn
      ],
      "  ",
      &"#{&1} #{Float.round(rows[&1].p50, 1)}"
    )
  )

  GenServer.stop(:hops_worker)
end
