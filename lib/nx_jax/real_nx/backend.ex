defmodule NxJax.Backend do
  @moduledoc """
  nx_jax's `Nx.Backend` under real Nx 0.7.2: tensors resident on a worker (`NxJax.Resident`),
  and every eager op a one-op jit on the worker where its resident arguments live, through
  `NxJax` (as EXLA.Backend runs each op through EXLA's compiler).

      Nx.default_backend(NxJax.Backend)
      x = Nx.tensor([1.0, 2.0])        # resident on a worker
      Nx.exp(x)                        # computed there, stays there
      Nx.backend_transfer(x)           # back to Nx.BinaryBackend

  A resident tensor lives as long as its Elixir terms (its guard frees it on the worker when
  they are garbage collected); `Nx.backend_deallocate/1` frees it at once. Jitted functions
  whose arguments are resident, or called while the default backend is this one, keep their
  results resident.
  """

  @behaviour Nx.Backend

  @enforce_keys [:worker, :handle, :guard]
  defstruct [:worker, :handle, :guard, copy: nil]

  alias Nx.Tensor, as: T

  @impl true
  def init(opts), do: opts

  ## Creation: made in Elixir memory, then made resident

  @impl true
  def from_binary(out, binary, _opts),
    do: NxJax.Resident.put(NxJax.Resident.binary_tensor(out, binary))

  @impl true
  def constant(out, number, _opts),
    do: NxJax.Resident.put(Nx.BinaryBackend.constant(out, number, []))

  @impl true
  def eye(out, _opts), do: NxJax.Resident.put(Nx.BinaryBackend.eye(out, []))

  @impl true
  def iota(out, axis, _opts), do: NxJax.Resident.put(Nx.BinaryBackend.iota(out, axis, []))

  ## Reading, copying, freeing

  @impl true
  def to_binary(tensor, limit) do
    binary = NxJax.Resident.read(tensor)
    size = min(byte_size(binary), limit * div(elem(tensor.type, 1), 8))
    binary_part(binary, 0, size)
  end

  @impl true
  def backend_copy(tensor, backend, opts) do
    out = Nx.to_template(tensor)
    backend.from_binary(out, NxJax.Resident.read(tensor), opts)
  end

  @impl true
  def backend_transfer(tensor, __MODULE__, _opts), do: tensor

  def backend_transfer(tensor, backend, opts) do
    copied = backend_copy(tensor, backend, opts)
    backend_deallocate(tensor)
    copied
  end

  @impl true
  def backend_deallocate(tensor), do: NxJax.Resident.deallocate(tensor)

  @impl true
  def to_batched(out, tensor, opts) do
    binary = NxJax.Resident.binary_tensor(tensor, NxJax.Resident.read(tensor))
    Stream.map(Nx.BinaryBackend.to_batched(out, binary, opts), &NxJax.Resident.put/1)
  end

  @impl true
  def inspect(tensor, opts) do
    limit = if opts.limit == :infinity, do: Nx.size(tensor), else: opts.limit + 1
    binary = to_binary(tensor, min(limit, Nx.size(tensor)))
    Nx.Backend.inspect(tensor, binary, opts)
  end

  ## Ops: each a jit of the expression of the same callback

  @impl true
  def optional(name, args, fun) do
    {tensors, rest} = Enum.split_while(args, &is_struct(&1, T))

    jit(fn tensors -> Nx.Defn.Expr.optional(name, Tuple.to_list(tensors) ++ rest, fun) end, [
      List.to_tuple(tensors)
    ])
  end

  @impl true
  def concatenate(out, tensors, axis) do
    out = Nx.to_template(out)

    jit(fn tensors -> Nx.Defn.Expr.concatenate(out, Tuple.to_list(tensors), axis) end, [
      List.to_tuple(tensors)
    ])
  end

  @impl true
  def slice(out, tensor, starts, lengths, strides) do
    out = Nx.to_template(out)

    if Enum.all?(starts, &is_integer/1) do
      jit(fn tensor -> Nx.Defn.Expr.slice(out, tensor, starts, lengths, strides) end, [tensor])
    else
      jit(
        fn tensor, starts ->
          Nx.Defn.Expr.slice(out, tensor, Tuple.to_list(starts), lengths, strides)
        end,
        [tensor, List.to_tuple(starts)]
      )
    end
  end

  @impl true
  def put_slice(out, tensor, starts, slice) do
    out = Nx.to_template(out)

    if Enum.all?(starts, &is_integer/1) do
      jit(fn tensor, slice -> Nx.Defn.Expr.put_slice(out, tensor, starts, slice) end, [
        tensor,
        slice
      ])
    else
      jit(
        fn tensor, starts, slice ->
          Nx.Defn.Expr.put_slice(out, tensor, Tuple.to_list(starts), slice)
        end,
        [tensor, List.to_tuple(starts), slice]
      )
    end
  end

  @impl true
  def lu({p, l, u}, tensor, opts) do
    out = {Nx.to_template(p), Nx.to_template(l), Nx.to_template(u)}
    jit(fn tensor -> Nx.Defn.Expr.lu(out, tensor, opts) end, [tensor])
  end

  # {callback, its arguments after `out`, those of them that are tensors}
  element_wise =
    ~w(exp expm1 log log1p sigmoid cos sin tan cosh sinh tanh acos asin atan acosh asinh
       atanh sqrt rsqrt cbrt is_nan is_infinity erf erfc erf_inv abs bitwise_not ceil
       conjugate floor negate round sign count_leading_zeros population_count real imag
       as_type bitcast reshape)a

  binary = ~w(add subtract multiply pow remainder divide atan2 min max quotient bitwise_and
       bitwise_or bitwise_xor left_shift right_shift equal not_equal greater less
       greater_equal less_equal logical_and logical_or logical_xor)a

  with_opts = ~w(all any sum product reduce_max reduce_min argmax argmin sort argsort fft ifft)a
  windows = ~w(window_sum window_product window_max window_min)a

  callbacks =
    for(op <- element_wise, do: {op, [:tensor], [:tensor]}) ++
      for(op <- binary, do: {op, [:left, :right], [:left, :right]}) ++
      for(op <- with_opts, do: {op, [:tensor, :opts], [:tensor]}) ++
      for(op <- windows, do: {op, [:tensor, :dims, :opts], [:tensor]}) ++
      [
        {:squeeze, [:tensor, :axes], [:tensor]},
        {:broadcast, [:tensor, :shape, :axes], [:tensor]},
        {:transpose, [:tensor, :axes], [:tensor]},
        {:pad, [:tensor, :value, :config], [:tensor, :value]},
        {:reverse, [:tensor, :axes], [:tensor]},
        {:dot, [:left, :c1, :b1, :right, :c2, :b2], [:left, :right]},
        {:clip, [:tensor, :min, :max], [:tensor, :min, :max]},
        {:select, [:pred, :on_true, :on_false], [:pred, :on_true, :on_false]},
        {:take, [:tensor, :indices, :axis], [:tensor, :indices]},
        {:take_along_axis, [:tensor, :indices, :axis], [:tensor, :indices]},
        {:gather, [:tensor, :indices, :opts], [:tensor, :indices]},
        {:conv, [:tensor, :kernel, :opts], [:tensor, :kernel]},
        {:reduce, [:tensor, :acc, :opts, :fun], [:tensor, :acc]},
        {:window_reduce, [:tensor, :acc, :dims, :opts, :fun], [:tensor, :acc]},
        {:map, [:tensor, :opts, :fun], [:tensor]},
        {:window_scatter_max, [:tensor, :source, :init, :dims, :opts], [:tensor, :source, :init]},
        {:window_scatter_min, [:tensor, :source, :init, :dims, :opts], [:tensor, :source, :init]},
        {:indexed_add, [:tensor, :indices, :updates, :opts], [:tensor, :indices, :updates]},
        {:indexed_put, [:tensor, :indices, :updates, :opts], [:tensor, :indices, :updates]},
        {:triangular_solve, [:a, :b, :opts], [:a, :b]}
      ]

  # Nx 0.9 dropped the callback map, made take and take_along_axis optional (their expressions
  # are Nx's fallbacks there) and added stack: a callback is defined where this Nx declares it
  # and has an expression for it
  declared = Nx.Backend.behaviour_info(:callbacks)
  expressions = Nx.Defn.Expr.__info__(:functions)

  callbacks =
    Enum.filter(callbacks, fn {name, args, _} ->
      {name, length(args) + 1} in declared and {name, length(args) + 1} in expressions
    end)

  if {:stack, 3} in declared do
    @impl true
    def stack(out, tensors, axis) do
      out = Nx.to_template(out)

      jit(fn tensors -> Nx.Defn.Expr.stack(out, Tuple.to_list(tensors), axis) end, [
        List.to_tuple(tensors)
      ])
    end
  end

  # Nx 0.9's zero-copy sharing: a resident tensor lives in a worker process, with no pointer a
  # caller could read
  if {:to_pointer, 2} in declared do
    @impl true
    def to_pointer(_tensor, _opts),
      do: {:error, "NxJax.Backend: a resident tensor lives on a worker; it has no pointer"}

    @impl true
    def from_pointer(_pointer, _type, _shape, _backend_opts, _opts),
      do: {:error, "NxJax.Backend: tensors are made resident from binaries, not from pointers"}
  end

  for {name, args, tensors} <- callbacks do
    args = Enum.map(args, &Macro.var(&1, __MODULE__))
    tensors = Enum.map(tensors, &Macro.var(&1, __MODULE__))

    @impl true
    def unquote(name)(out, unquote_splicing(args)) do
      out = Nx.to_template(out)

      jit(
        fn unquote_splicing(tensors) ->
          Nx.Defn.Expr.unquote(name)(out, unquote_splicing(args))
        end,
        [unquote_splicing(tensors)]
      )
    end
  end

  # (`on_conflict: :force`: an eager op inside another jit is its own)
  defp jit(fun, args),
    do: Nx.Defn.jit_apply(fun, args, compiler: NxJax, on_conflict: :force)
end
