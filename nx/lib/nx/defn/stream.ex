defmodule Nx.Defn.Stream do
  @moduledoc false
  # The process behind `Nx.Defn.stream/3`: it holds the accumulator, runs the jitted step on
  # each input it is sent, in order, and queues the outputs for `recv` (or hands them to
  # the callers already waiting).
  use GenServer

  @enforce_keys [:pid, :input, :output]
  defstruct [:pid, :input, :output, gone: :exit]

  @doc false
  # `step` takes an input and the accumulator and returns `{output, accumulator}`. Each input
  # is the first argument given to `Nx.Defn.stream/3` with its tensors replaced by those
  # sent (as in Nx 0.7.2, the fields a struct keeps out of its container are the first
  # argument's, not those of the data sent). Options: `:output`, the template each output is
  # checked against on recv (by default the accumulator's, as Nx 0.7.2's evaluator checks;
  # EXLA's streams check the step's output); `gone: :raise` makes a recv or done of a stream
  # that has ended raise a RuntimeError, as EXLA's do (by default it exits, as Nx's evaluator's).
  def start_link(input, acc, step, opts \\ []) do
    skeleton = Nx.Defn.Composite.expand_lazy(input, fn template, _make -> template end)
    {:ok, pid} = GenServer.start_link(__MODULE__, {skeleton, acc, step})
    output = Keyword.get_lazy(opts, :output, fn -> Nx.to_template(acc) end)
    gone = Keyword.get(opts, :gone, :exit)
    %__MODULE__{pid: pid, input: Nx.to_template(input), output: output, gone: gone}
  end

  @doc false
  # The argument list of a compiler's step (an `args_list` entry of Nx.Defn.Compiler's
  # callbacks) for the input `data` sent, the accumulator `acc` so far and the functions of the
  # other arguments `rest` (a lazy container sent is made here, in the stream's process)
  def step_args(data, acc, rest) do
    data = Nx.Defn.Composite.expand_lazy(data, &%Nx.Tensor{&1 | data: {:lazy, &2}})
    leaf_funs(data) ++ leaf_funs(acc) ++ rest
  end

  defp leaf_funs(container),
    do: for(leaf <- Nx.Defn.Composite.flatten_list([container]), do: fn -> made(leaf) end)

  defp made(%Nx.Tensor{data: {:lazy, make}}), do: make.()
  defp made(leaf), do: leaf

  @impl true
  def init({skeleton, acc, step}) do
    state = %{outputs: :queue.new(), waiting: :queue.new(), skeleton: skeleton}
    {:ok, Map.merge(state, %{acc: acc, step: step})}
  end

  @impl true
  def handle_cast({:send, payload}, state) do
    data =
      case payload do
        {:leaves, leaves} -> Nx.Defn.Composite.fill(state.skeleton, leaves)
        {:data, data} -> data
      end

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

      GenServer.cast(pid, {:send, payload(data)})
    end

    # the tensors of the data, which the stream puts in its first argument's place; a lazy
    # container is sent as it is, so that only the tensors the step reads are made
    defp payload(data) do
      if lazy?(data), do: {:data, data}, else: {:leaves, Nx.Defn.Composite.flatten_list([data])}
    end

    defp lazy?(data) do
      Nx.Defn.Composite.expand_lazy(data, fn _template, _make -> throw(:lazy) end)
      false
    catch
      :lazy -> true
    end

    def recv(%{pid: pid, output: output} = stream) do
      case call(stream, pid, :recv) do
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

    def done(%{pid: pid} = stream) do
      case call(stream, pid, :done) do
        {:ok, acc} ->
          acc

        :outputs_pending ->
          raise "cannot mark stream as done when there are recv messages pending"
      end
    end

    defp call(%{gone: :exit}, pid, request), do: GenServer.call(pid, request, :infinity)

    defp call(%{gone: :raise}, pid, request) do
      GenServer.call(pid, request, :infinity)
    catch
      :exit, {reason, _} when reason in [:noproc, :normal] ->
        what = if request == :recv, do: "recv from stream", else: "mark stream as done"
        raise "cannot #{what} because it has been terminated"
    end
  end
end
