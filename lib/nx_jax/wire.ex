defmodule NxJax.Wire do
  @moduledoc """
  The Elixir side of the wire: the external term format of the frames a worker's port carries
  (`{:packet, 4}` framing is the port's own; docs/PROTOCOL.md), in one place.

  - Requests: `request_header/2` and `graph_call_frame/6` build the `{:"C", id, :nx_jax,
    function, args}` frames; `encode_body/1` encodes arguments as iodata in which binaries of
    64 KiB or more (`big_binary/0`) are referenced, not copied; a body of small terms is one
    `:erlang.term_to_binary/1`, and `args_body/1` writes a call's small tensors itself.
  - Replies: `decode_reply/1` turns a frame into `{id, {:ok, result}}` or `{id, {:error,
    {class, message, traceback}}}` (any other frame, a log line or a hook's values, comes back
    as it is); `decode_frame/1` returns the binaries of large frames as sub-binaries of the
    frame; `lent_reply/2` reads the commonest reply (a list of tensors) straight from its bytes.
    Atoms are never made from a frame: the atom table is never collected, so a frame naming an
    atom outside `reply_atoms/0` is refused (`"BadReply"`).

  The byte layouts these fast paths expect are those of `py_backend/channel.py`; the tests of
  `test_elixir/perf_cache_test.exs` and `lent_port_test.exs` check them against a real worker.
  """

  @big_binary 65_536

  @doc "Binaries of this many bytes or more are referenced by the iodata, not copied."
  def big_binary, do: @big_binary

  @doc """
  Encodes `term` as external-term-format iodata equal, byte for byte once flattened, to a
  valid encoding of `term` (`:erlang.binary_to_term/1` gives `term` back); binaries of 64 KiB
  or more are referenced by the iodata, not copied.

  ## Examples

      iex> term = {:a, [1, <<0::size(65536)-unit(8)>>], %{b: 2.5}}
      iex> :erlang.binary_to_term(IO.iodata_to_binary(NxJax.Wire.encode_iodata(term))) == term
      true
  """
  def encode_iodata(term), do: [131 | encode_body(term)]

  @doc "`encode_iodata/1` without the version byte: a term inside a frame."
  def encode_body(term) do
    if big_binary?(term), do: encode_big(term), else: small_body(term)
  end

  @doc "The encoding of `term` without the version byte, as one binary."
  def small_body(term) do
    <<131, body::binary>> = :erlang.term_to_binary(term)
    body
  end

  @doc """
  `small_body/1` of a call's argument list, as iodata: written here, byte for byte as
  `:erlang.term_to_binary/1` writes it, when every argument is a wire tensor `{type, shape,
  data}` (the repeated call's common case), by `small_body/1` otherwise. On a CPU shared with
  the worker, term_to_binary's code costs the call more than these few clauses
  (measured 2026-12-05: `git show 19d163f:docs/BENCHMARKS.md`, "The client's layers on a shared CPU, cut one by one").

  ## Examples

      iex> args = [{{:f, 32}, {2, 300}, <<0, 0, 128, 63>>}, {{:s, 64}, {}, <<7::64>>}]
      iex> IO.iodata_to_binary(NxJax.Wire.args_body(args)) == NxJax.Wire.small_body(args)
      true
  """
  def args_body([_ | _] = args) do
    case tensors_body(args) do
      nil -> small_body(args)
      tensors -> [<<108, length(args)::32>>, tensors, 106]
    end
  end

  def args_body(args), do: small_body(args)

  defp tensors_body([{{kind, bits}, shape, data} | rest])
       when is_binary(data) and is_tuple(shape) and tuple_size(shape) < 256 and
              is_integer(bits) and bits >= 0 and bits < 256 do
    with kind when kind != nil <- type_kind(kind),
         dims when dims != nil <- dims_body(shape, tuple_size(shape), []),
         rest when rest != nil <- tensors_body(rest) do
      head = <<104, 3, 104, 2, kind::binary, 97, bits, 104, tuple_size(shape)>>
      [head, dims, <<109, byte_size(data)::32>>, data | rest]
    end
  end

  defp tensors_body([]), do: []
  defp tensors_body(_other), do: nil

  # a shape's dimensions as term_to_binary encodes integers (SMALL_INTEGER_EXT, INTEGER_EXT),
  # the last first
  defp dims_body(_shape, 0, acc), do: acc

  defp dims_body(shape, i, acc) do
    case elem(shape, i - 1) do
      d when is_integer(d) and d >= 0 and d < 256 ->
        dims_body(shape, i - 1, [97, d | acc])

      d when is_integer(d) and d >= 0 and d < 2_147_483_648 ->
        dims_body(shape, i - 1, [<<98, d::32>> | acc])

      _ ->
        nil
    end
  end

  # the atoms of Nx's type kinds, each as term_to_binary encodes it on this OTP
  for kind <- [:f, :bf, :s, :u, :c] do
    <<131, encoded::binary>> = :erlang.term_to_binary(kind)
    defp type_kind(unquote(kind)), do: unquote(encoded)
  end

  defp type_kind(_other), do: nil

  # {:"C", id, :nx_jax, function, args}: the version byte, the tuple header and :"C"; the module
  <<131, c_atom::binary>> = :erlang.term_to_binary(:C)
  <<131, module_atom::binary>> = :erlang.term_to_binary(:nx_jax)
  @request_head <<131, 104, 5>> <> c_atom
  @module_atom module_atom
  # the atoms of call's [key, graph | nil, args, keep]
  <<131, nil_atom::binary>> = :erlang.term_to_binary(nil)
  <<131, true_atom::binary>> = :erlang.term_to_binary(true)
  <<131, false_atom::binary>> = :erlang.term_to_binary(false)
  @nil_atom nil_atom
  @true_atom true_atom
  @false_atom false_atom

  # the function's atom, that of call (each graph call's) encoded once
  <<131, call_atom::binary>> = :erlang.term_to_binary(:call)
  @call_atom call_atom
  # the head of a reply {:r, id, result} as the worker encodes it (lent_reply/2)
  @reply_head <<131, 104, 3, 115, 1, ?r>>
  defp function_atom(:call), do: @call_atom
  defp function_atom(function), do: small_body(function)

  @doc """
  The head of request `id` calling `function`: the frame is this followed by the encoded
  argument list (`encode_body/1`).
  """
  def request_header(id, function),
    do: [@request_head, encode_id(id), @module_atom, function_atom(function)]

  @doc """
  The frame of request `id`: `call(key, graph | nil, args, keep)`, `args` already encoded
  (`encode_body/1` or `small_body/1` of the list of arguments).
  """
  def graph_call_frame(id, key, graph, args, keep, donate \\ []) do
    graph = if graph, do: encode_body(graph), else: @nil_atom
    keep = if keep, do: @true_atom, else: @false_atom

    # (`donate`, the positions of the resident arguments the results may reuse, is a fifth
    # argument only when there are some: the common frame stays the one the fast paths know)
    # (a list of small integers written as a list: term_to_binary would make it a string)
    {count, donate} =
      if donate == [],
        do: {4, []},
        else: {5, [<<108, length(donate)::32>>, Enum.map(donate, &small_body/1), 106]}

    [
      request_header(id, :call),
      <<108, count::32, 109, byte_size(key)::32>>,
      key,
      graph,
      args,
      keep,
      donate,
      106
    ]
  end

  # Every atom a worker writes (py_backend: the reply tags, info's, stats' and memory's keys,
  # the served functions, Nx's type kinds, the log streams), named here so that they exist
  # once this module is loaded: frames are decoded with existing atoms only.
  # test_elixir/wire_test.exs holds the list equal to what py_backend writes.
  @reply_atoms ~w(r e python log hook ref ok pong stdout stderr f bf s u c
                  protocol jax_version backend devices codec functions pipe_bytes sources package
                  refusal device platform
                  compiles cache_hits runs errors graph_loads unknown_graphs fast_one_calls
                  fast_hot_calls fast_layout_calls resident resident_bytes pressure_notices
                  paused_spins rss peak_rss pressure
                  ping info run debug_run stats call put fetch free forget_graphs memory
                  debug_print)a

  @doc "The atoms a worker's frames may hold (besides `nil`, `true` and `false`)."
  def reply_atoms, do: @reply_atoms

  @doc """
  A frame from the worker: a reply as `{id, {:ok, result}}` or `{id, {:error, {class,
  message, traceback}}}`; anything else (a log line, a hook's values) as it is. A frame that
  cannot be decoded (malformed, or naming an atom this node does not have: atoms are never
  made from the wire) is `{id, {:error, {"BadReply", message, ""}}}` when its head gives the
  id of a reply, `{:bad_frame, message}` otherwise.
  """
  def decode_reply(frame) do
    case decode_frame(frame) do
      {:r, id, result} ->
        {id, {:ok, result}}

      {:e, id, {:python, class, message, traceback}} ->
        {id, {:error, {to_text(class), to_text(message), to_text(traceback)}}}

      other ->
        other
    end
  rescue
    ArgumentError -> bad_reply(frame)
  end

  defp bad_reply(frame) do
    message =
      "the worker sent a frame of #{byte_size(frame)} bytes that cannot be decoded: " <>
        "malformed, or naming an atom this node does not have (atoms are never made from " <>
        "the wire; NxJax.Wire.reply_atoms/0 lists those the worker may send)"

    case reply_id(frame) do
      nil -> {:bad_frame, message}
      id -> {id, {:error, {"BadReply", message, ""}}}
    end
  end

  # the id of a reply {:r | :e, id, ...} read from its frame's head
  defp reply_id(<<131, 104, 3, tag, 1, kind, rest::binary>>)
       when tag in [115, 119] and kind in [?r, ?e] do
    case rest do
      <<97, id, _::binary>> -> id
      <<98, id::32, _::binary>> when id < 2_147_483_648 -> id
      <<110, n, 0, id::little-size(n)-unit(8), _::binary>> -> id
      _ -> nil
    end
  end

  defp reply_id(_frame), do: nil

  @doc """
  The reply of a borrowed call (`NxJax.Worker.LentPort`): as `decode_reply/1`, read straight
  from the frame when it is the common one (`fast_reply/2`), by `decode_reply/1` otherwise.
  """
  def lent_reply(frame, id), do: fast_reply(frame, id) || decode_reply(frame)

  @doc """
  The commonest reply, `{:r, id, [tensor, ...]}` with this call's `id`, read straight from its
  bytes as the worker encodes them (atoms as SMALL_ATOM_EXT, `py_backend/channel.py`): `{id,
  {:ok, tensors}}`, the binaries sub-binaries of the frame as `decode_frame/1`'s; nil for any
  other frame. (Counted as `fast_replies` in `NxJax.Worker.stats/1`: if the worker's encoding
  changes, the count stops growing.)
  """
  def fast_reply(<<@reply_head, 98, id::32, 108, n::32, rest::binary>>, id),
    do: lent_results(n, rest, [], id)

  def fast_reply(<<@reply_head, 97, id, 108, n::32, rest::binary>>, id),
    do: lent_results(n, rest, [], id)

  def fast_reply(_frame, _id), do: nil

  defp lent_results(0, <<106>>, acc, id), do: {id, {:ok, :lists.reverse(acc)}}

  defp lent_results(
         n,
         <<104, 3, 104, 2, 115, 1, kind, 97, bits, 104, rank, rest::binary>>,
         acc,
         id
       )
       when kind in [?f, ?s, ?u, ?c] do
    with {shape, <<109, size::32, data::binary-size(size), rest::binary>>} <-
           lent_dims(rank, rest, []) do
      lent_results(n - 1, rest, [{{kind_atom(kind), bits}, shape, data} | acc], id)
    else
      _ -> nil
    end
  end

  defp lent_results(_n, _rest, _acc, _id), do: nil

  defp lent_dims(0, rest, dims), do: {List.to_tuple(:lists.reverse(dims)), rest}
  defp lent_dims(k, <<97, d, rest::binary>>, dims), do: lent_dims(k - 1, rest, [d | dims])

  defp lent_dims(k, <<98, d::32, rest::binary>>, dims) when d < 2_147_483_648,
    do: lent_dims(k - 1, rest, [d | dims])

  defp lent_dims(_k, _rest, _dims), do: nil

  defp kind_atom(?f), do: :f
  defp kind_atom(?s), do: :s
  defp kind_atom(?u), do: :u
  defp kind_atom(?c), do: :c

  # the id as term_to_binary encodes it (SMALL_INTEGER_EXT, INTEGER_EXT, then bignums)
  defp encode_id(id) when id < 256, do: <<97, id>>
  defp encode_id(id) when id < 2_147_483_648, do: <<98, id::32>>
  defp encode_id(id), do: small_body(id)

  defp encode_big(bin) when is_binary(bin), do: [<<109, byte_size(bin)::32>>, bin]

  defp encode_big(tuple) when is_tuple(tuple) do
    size = tuple_size(tuple)
    header = if size < 256, do: <<104, size>>, else: <<105, size::32>>
    [header | tuple |> Tuple.to_list() |> Enum.map(&encode_body/1)]
  end

  defp encode_big(list) when is_list(list) do
    [<<108, length(list)::32>>, Enum.map(list, &encode_body/1), 106]
  end

  defp big_binary?(bin) when is_binary(bin), do: byte_size(bin) >= @big_binary
  defp big_binary?(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> big_binary?()
  defp big_binary?([head | tail]), do: big_binary?(head) or big_binary?(tail)
  defp big_binary?(_other), do: false

  @doc """
  Decodes one frame (external term format) with existing atoms only: raises `ArgumentError`
  for an atom this node does not have, as for malformed bytes. Frames under 64 KiB go to
  `:erlang.binary_to_term(frame, [:safe])`; larger ones are decoded here so that their
  binaries are sub-binaries of `frame` (`binary_to_term/2` would copy each one).

  ## Examples

      iex> term = {:r, 1, [{{:f, 32}, {2}, <<0::size(70000)-unit(8)>>}], %{a: -3, b: "x"}}
      iex> NxJax.Wire.decode_frame(:erlang.term_to_binary(term)) == term
      true
  """
  def decode_frame(frame) when byte_size(frame) < @big_binary,
    do: :erlang.binary_to_term(frame, [:safe])

  def decode_frame(<<131, rest::binary>> = frame) do
    case dec(rest) do
      {term, <<>>} -> term
      _ -> :erlang.binary_to_term(frame, [:safe])
    end
  rescue
    _ in [FunctionClauseError, MatchError, CaseClauseError] ->
      :erlang.binary_to_term(frame, [:safe])
  end

  defp dec(<<97, int, rest::binary>>), do: {int, rest}
  defp dec(<<98, int::signed-32, rest::binary>>), do: {int, rest}
  defp dec(<<70, float::float-64, rest::binary>>), do: {float, rest}
  defp dec(<<109, size::32, bin::binary-size(size), rest::binary>>), do: {bin, rest}
  defp dec(<<106, rest::binary>>), do: {[], rest}
  defp dec(<<104, arity, rest::binary>>), do: dec_tuple(arity, rest, [])
  defp dec(<<105, arity::32, rest::binary>>), do: dec_tuple(arity, rest, [])
  defp dec(<<119, len, name::binary-size(len), rest::binary>>), do: {atom(name, :utf8), rest}
  defp dec(<<118, len::16, name::binary-size(len), rest::binary>>), do: {atom(name, :utf8), rest}
  defp dec(<<115, len, name::binary-size(len), rest::binary>>), do: {atom(name, :latin1), rest}

  defp dec(<<100, len::16, name::binary-size(len), rest::binary>>),
    do: {atom(name, :latin1), rest}

  defp dec(<<107, len::16, chars::binary-size(len), rest::binary>>),
    do: {:binary.bin_to_list(chars), rest}

  defp dec(<<108, count::32, rest::binary>>) do
    {items, rest} = dec_many(count, rest, [])
    {tail, rest} = dec(rest)
    {items ++ tail, rest}
  end

  defp dec(<<116, count::32, rest::binary>>) do
    {items, rest} = dec_many(2 * count, rest, [])
    {items |> Enum.chunk_every(2) |> Map.new(fn [k, v] -> {k, v} end), rest}
  end

  defp dec(<<110, n, sign, digits::binary-size(n), rest::binary>>) do
    value = :binary.decode_unsigned(digits, :little)
    {if(sign == 0, do: value, else: -value), rest}
  end

  defp dec_tuple(arity, rest, _acc) do
    {items, rest} = dec_many(arity, rest, [])
    {List.to_tuple(items), rest}
  end

  defp dec_many(0, rest, acc), do: {Enum.reverse(acc), rest}

  defp dec_many(count, rest, acc) do
    {item, rest} = dec(rest)
    dec_many(count - 1, rest, [item | acc])
  end

  # (raises ArgumentError for an atom this node does not have)
  defp atom(name, encoding), do: :erlang.binary_to_existing_atom(name, encoding)

  @doc "A text field of a frame (a binary, an atom or a charlist) as a string."
  def to_text(text) when is_binary(text), do: text
  def to_text(text) when is_atom(text), do: Atom.to_string(text)
  def to_text(text) when is_list(text), do: List.to_string(text)
  def to_text(other), do: inspect(other)
end
