defmodule Nx.Defn.Stream do
  @moduledoc false
  # The process behind `Nx.Defn.stream/3`: it holds the accumulator, runs the jitted step on
  # each input it is sent, in order, and queues the outputs for `recv` (or hands them to
  # the callers already waiting).
  use GenServer

  @enforce_keys [:pid, :input, :output]
  defstruct [:pid, :input, :output]

  @doc false
  # `step` takes an input and the accumulator and returns `{output, accumulator}`
  def start_link(input_template, acc, step) do
    {:ok, pid} = GenServer.start_link(__MODULE__, {acc, step})
    %__MODULE__{pid: pid, input: input_template, output: Nx.to_template(acc)}
  end

  @impl true
  def init({acc, step}),
    do: {:ok, %{outputs: :queue.new(), waiting: :queue.new(), acc: acc, step: step}}

  @impl true
  def handle_cast({:send, data}, state) do
    {output, acc} =
      case state.step.(data, state.acc) do
        {output, acc} ->
          {output, acc}

        other ->
          raise ArgumentError,
                "the function given to Nx.Defn.stream/3 must return a tuple " <>
                  "{output, accumulator}, got: #{inspect(other)}"
      end

    state = %{state | acc: acc}

    case :queue.out(state.waiting) do
      {{:value, from}, waiting} ->
        GenServer.reply(from, {:ok, output})
        {:noreply, %{state | waiting: waiting}}

      {:empty, _} ->
        {:noreply, %{state | outputs: :queue.in(output, state.outputs)}}
    end
  end

  @impl true
  def handle_call(:recv, from, state) do
    case :queue.out(state.outputs) do
      {{:value, output}, outputs} -> {:reply, {:ok, output}, %{state | outputs: outputs}}
      {:empty, _} -> {:noreply, %{state | waiting: :queue.in(from, state.waiting)}}
    end
  end

  def handle_call(:done, _from, state) do
    if :queue.is_empty(state.outputs) do
      for from <- :queue.to_list(state.waiting), do: GenServer.reply(from, :done)
      {:stop, :normal, {:ok, state.acc}, state}
    else
      {:reply, :outputs_pending, state}
    end
  end

  defimpl Nx.Stream do
    def send(%{pid: pid, input: input}, data) do
      template = Nx.to_template(data)

      unless Nx.compatible?(input, template) do
        raise ArgumentError,
              "Nx stream expected a tensor of type, shape, and names on send:\n\n" <>
                "#{inspect(input)}\n\nBut got tensor:\n\n#{inspect(template)}\n"
      end

      GenServer.cast(pid, {:send, data})
    end

    def recv(%{pid: pid, output: output}) do
      case GenServer.call(pid, :recv, :infinity) do
        {:ok, data} ->
          unless Nx.compatible?(output, data) do
            raise ArgumentError,
                  "Nx stream expected a tensor of type, shape, and names on recv:\n\n" <>
                    "#{inspect(output)}\n\nBut got tensor:\n\n#{inspect(Nx.to_template(data))}\n"
          end

          data

        :done ->
          raise "cannot recv from stream because it has been terminated"
      end
    end

    def done(%{pid: pid}) do
      case GenServer.call(pid, :done, :infinity) do
        {:ok, acc} ->
          acc

        :outputs_pending ->
          raise "cannot mark stream as done when there are recv messages pending"
      end
    end
  end
end
