defmodule Nx.Serving.Distributed do
  @moduledoc false
  # Requests to a serving of another node (or this one's, reached the same way): a serving
  # of the name is picked at random among the members of its :pg group (each serving is in
  # it as many times as its weight), and a process spawned on that serving's node makes the
  # request there (Nx.Serving.Client.request/3). It exits with {ref, answer}, which the
  # client's monitor receives; a streaming answer's events are sent before it exits.

  @retries 3

  def run(name, input, distributed_preprocessing) do
    attempt(name, distributed_preprocessing.(input), @retries)
  end

  defp attempt(name, input, 0) do
    exit({:noproc, {Nx.Serving, :distributed_batched_run, [name, input, [retries: 0]]}})
  end

  defp attempt(name, input, retries) do
    case members(name) do
      [] ->
        exit({:noproc, {Nx.Serving, :distributed_batched_run, [name, input, [retries: retries]]}})

      members ->
        serving = Enum.random(members)
        ref = make_ref()
        args = [self(), ref, name, input]

        {_pid, monitor} =
          Node.spawn_monitor(node(serving), Nx.Serving, :__distributed_batched_run__, args)

        receive do
          {^ref, :streaming} ->
            events(ref, monitor)

          {:DOWN, ^monitor, _, _, {^ref, answer}} ->
            answer

          # the serving stopped before the request reached it: another one
          {:DOWN, ^monitor, _, _, :noproc} ->
            attempt(name, input, retries - 1)

          {:DOWN, ^monitor, _, _, reason} ->
            exit(
              {reason, {Nx.Serving, :distributed_batched_run, [name, input, [retries: retries]]}}
            )
        end
    end
  end

  # (a node where the :nx application, and with it the scope, is not started has none)
  defp members(name) do
    :pg.get_members(Nx.Serving.PG, {Nx.Serving, name})
  rescue
    ArgumentError -> []
  end

  defp events(ref, monitor) do
    owner = self()

    Stream.resource(
      fn ->
        if self() != owner do
          raise "the stream returned from Nx.Serving.batched_run/2 must be consumed in the same process"
        end

        :reading
      end,
      fn
        :finished ->
          {:halt, :finished}

        :reading ->
          receive do
            {^ref, event} -> {[event], :reading}
            {:DOWN, ^monitor, _, _, {^ref, :streaming}} -> {:halt, :finished}
            {:DOWN, ^monitor, _, _, reason} -> exit({reason, {Nx.Serving, :streaming, []}})
          end
      end,
      fn
        :finished -> :ok
        :reading -> Process.demonitor(monitor, [:flush])
      end
    )
  end

  @doc false
  def __distributed_batched_run__(client, ref, name, input) do
    pid = Process.whereis(name) || exit(:noproc)

    case Nx.Serving.Client.request(pid, name, input) do
      {:ok, answer} ->
        %{mode: mode, distributed_postprocessing: postprocessing} =
          :persistent_term.get({Nx.Serving, name})

        if mode == :execute do
          exit({ref, postprocessing.(answer)})
        else
          send(client, {ref, :streaming})
          Enum.each(postprocessing.(answer), &send(client, {ref, &1}))
          exit({ref, :streaming})
        end

      {:down, reason} ->
        exit(reason)
    end
  end
end
