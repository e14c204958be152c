defprotocol Nx.Stream do
  @moduledoc """
  Streams data in and out of a running computation: `Nx.Defn.stream/3` returns one.

  `send/2` hands the computation one input (a tensor or container compatible with the
  stream's input template) and returns `:ok` at once; `recv/1` waits for the output of the
  oldest input not yet received; `done/1` ends the stream and returns the accumulator.
  """

  @doc "Sends one input to the stream; returns `:ok`."
  def send(stream, data)

  @doc "Receives the output of the oldest input not yet received (waits for it)."
  def recv(stream)

  @doc "Ends the stream and returns its accumulator (a tensor or container)."
  def done(stream)
end
