defmodule NxJax.Stream do
  @moduledoc """
  A stream of `Nx.Defn.stream/3` under real Nx with `compiler: NxJax`: a process that runs the
  traced step once per input sent, on the accumulator so far, and queues the step's output for
  `Nx.Stream.recv/1`; `Nx.Stream.done/1` ends it and returns the accumulator.

  (Real Nx's own stream process, `Nx.Defn.Stream`, checks what it receives against the
  accumulator's template, so a step whose output is not shaped as its accumulator could not
  be received; EXLA's streams check it against the output's. This one does as EXLA.)

  States: running (inputs and receives in any order; a receive with no output yet waits) ->
  done (the process stops; a receive then raises).
  """

  use GenServer

  @enforce_keys [:pid, :input, :output]
  defstruct [:pid, :input, :output]

  @doc false
  def start_link(input, output, acc, step) when is_function(step, 2) do
    {:ok, pid} = GenServer.start_link(__MODULE__, {acc, step})
    %__MODULE__{pid: pid, input: input, output: output}
  end

  @impl true
  def init({acc, step}),
    do: {:ok, %{acc: acc, step: step, outputs: :queue.new(), waiting: :queue.new()}}

  @impl true
  def handle_cast({:send, args}, state) do
    {output, acc} = state.step.(args, state.acc)

    case :queue.out(state.waiting) do
      {:empty, _} ->
        {:noreply, %{state | acc: acc, outputs: :queue.in(output, state.outputs)}}

      {{:value, from}, waiting} ->
        GenServer.reply(from, {:ok, output})
        {:noreply, %{state | acc: acc, waiting: waiting}}
    end
  end

  @impl true
  def handle_call(:recv, from, state) do
    case :queue.out(state.outputs) do
      {:empty, _} -> {:noreply, %{state | waiting: :queue.in(from, state.waiting)}}
      {{:value, output}, outputs} -> {:reply, {:ok, output}, %{state | outputs: outputs}}
    end
  end

  def handle_call(:done, _from, state) do
    if :queue.is_empty(state.outputs) do
      {:stop, :normal, {:ok, state.acc}, state}
    else
      {:reply, :recv_pending, state}
    end
  end

  defimpl Nx.Stream do
    def send(%{pid: pid, input: input}, data) do
      {template, funs} =
        Nx.LazyContainer.traverse(data, [], fn template, fun, acc -> {template, [fun | acc]} end)

      unless Nx.compatible?(input, template) do
        raise ArgumentError,
              "Nx stream expected a tensor of type, shape, and names on send:\n\n" <>
                "#{inspect(input)}\n\nBut got tensor:\n\n#{inspect(template)}"
      end

      GenServer.cast(pid, {:send, Enum.reverse(funs)})
    end

    def recv(%{pid: pid}) do
      case call(pid, :recv) do
        {:ok, output} -> output
        :gone -> raise "cannot recv from stream because it has been terminated"
      end
    end

    def done(%{pid: pid}) do
      case call(pid, :done) do
        {:ok, acc} -> acc
        :recv_pending -> raise "cannot mark stream as done when there are recv messages pending"
        :gone -> raise "cannot mark stream as done because it has been terminated"
      end
    end

    defp call(pid, message) do
      GenServer.call(pid, message, :infinity)
    catch
      :exit, {reason, _} when reason in [:noproc, :normal] -> :gone
    end
  end
end
