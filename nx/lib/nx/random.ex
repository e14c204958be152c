defmodule Nx.Random do
  @moduledoc """
  Counter-based pseudo-random numbers: Threefry-2x32 (20 rounds) driven by explicit keys.

  There is no hidden generator state. A key is a `u32[2]` tensor, made from a seed with
  `key/1`; every function takes a key and returns numbers that depend only on that key,
  the shape and the type. The functions without the `_split` suffix also return the key
  to use next (`{numbers, new_key}`); the `_split` ones use the key they are given as it
  is, for a key that was split already (`split/2`).

      iex> key = Nx.Random.key(12)
      iex> {u, _next_key} = Nx.Random.uniform(key)
      iex> u
      #Nx.Tensor<
        f32
        0.7691127061843872
      >

  Every function is a `defn`: called eagerly it is traced once per signature and run on
  the worker; called inside `defn` it becomes part of that graph (so it composes with
  `while`, `cond`, `vectorize` and `grad`, where the numbers are constants: the
  results go through `stop_grad/1`).

  The streams are those of Nx 0.7.2, bit for bit: the same keys, splits and hash, the
  same mapping of bits to numbers, and the arithmetic rounded as Nx's binary backend
  rounds it (each operation rounded to the result type; a `bf16` result is the `f32`
  result with its low 16 bits dropped). See docs/COMPATIBILITY.md ("Nx.Random") for
  what was compared and the few places where the numbers can differ.
  """

  import Nx.Defn, only: [defn: 2, defnp: 2, deftransformp: 2]

  # Threefry-2x32's rotation constants (two groups of four rounds) and key-schedule parity
  @rotations {[13, 15, 26, 6], [17, 29, 16, 24]}
  @parity 0x1BD11BDA

  ## Keys

  @doc """
  Returns the key for the integer `seed`: `[seed >> 32, seed & 0xFFFFFFFF]` as `u32[2]`
  (an arithmetic shift, so negative seeds have a high word of all ones).

  ## Examples

      iex> Nx.Random.key(12)
      #Nx.Tensor<
        u32[2]
        [0, 12]
      >

      iex> Nx.Random.key(999999999999)
      #Nx.Tensor<
        u32[2]
        [232, 3567587327]
      >
  """
  defn key(seed) do
    seed_words(seed)
  end

  deftransformp seed_words(seed) do
    high = Nx.right_shift(seed, 32)
    low = Nx.bitwise_and(seed, 0xFFFFFFFF)
    [high, low] |> Nx.stack() |> Nx.as_type({:u, 32}) |> constant()
  end

  @doc """
  Splits `key` into `parts` new keys (option `:parts`, default 2), stacked along a new
  leading axis: `u32[parts][2]`.

  ## Examples

      iex> Nx.Random.split(Nx.Random.key(1701))
      #Nx.Tensor<
        u32[2][2]
        [
          [56197195, 1801093307],
          [961309823, 1704866707]
        ]
      >
  """
  defn split(key, opts \\ []) do
    split_key(key, opts)
  end

  deftransformp split_key(key, opts) do
    assert_key!(key)
    opts = keyword!(opts, parts: 2)
    parts = opts[:parts]

    unless is_integer(parts) and parts > 0 do
      raise ArgumentError,
            "invalid dimension in axis 1 found in shape. Each dimension must be a positive " <>
              "integer, got #{inspect(parts)} in shape {2, #{inspect(parts)}}"
    end

    key |> hash_counters({parts, 2}) |> constant()
  end

  @doc """
  Derives a new key from `key` and the integer `data` (a number or an integer tensor):
  one key per element of `data`, the result has shape `{*shape(data), 2}`.

  ## Examples

      iex> Nx.Random.fold_in(Nx.Random.key(42), 99)
      #Nx.Tensor<
        u32[2]
        [2015327502, 1351855566]
      >
  """
  defn fold_in(key, data) do
    fold(key, data)
  end

  deftransformp fold(key, data) do
    assert_key!(key)
    shape = Nx.shape(data)
    high = Nx.right_shift(data, 32)
    low = Nx.bitwise_and(data, 0xFFFFFFFF)

    words = [high, low] |> Nx.stack() |> Nx.reshape({2, Nx.size(data)}) |> Nx.as_type({:u, 32})
    {x0, x1} = threefry(words[0], words[1], key)

    [x0, x1]
    |> Nx.stack(axis: -1)
    |> Nx.reshape(Tuple.insert_at(shape, tuple_size(shape), 2))
    |> constant()
  end

  @doc """
  The Threefry-2x32 hash with 20 rounds: `xs` is a `u32[2][n]` of counter pairs (row 0
  the first words, row 1 the second), `ks` the `u32[2]` key; returns the `2n` hashed
  words, first words then second words.

  ## Examples

  The known answer of the Random123 reference implementation:

      iex> xs = Nx.tensor([[0x243F6A88], [0x85A308D3]], type: :u32)
      iex> ks = Nx.tensor([0x13198A2E, 0x03707344], type: :u32)
      iex> Nx.Random.threefry2x32_20_concat(xs, ks)
      #Nx.Tensor<
        u32[2]
        [3297917596, 1212020640]
      >
  """
  defn threefry2x32_20_concat(xs, ks) do
    {x0, x1} = threefry(xs[0], xs[1], ks)
    Nx.concatenate([x0, x1])
  end

  # The rounds are unrolled at trace time: 5 groups of 4 add-rotate-xor rounds, the key
  # (extended with the parity word) injected after each group with the group's number.
  deftransformp threefry(x0, x1, key) do
    k0 = key[0]
    k1 = key[1]
    schedule = {k0, k1, k0 |> Nx.bitwise_xor(k1) |> Nx.bitwise_xor(@parity)}
    start = {Nx.add(x0, k0), Nx.add(x1, k1)}

    Enum.reduce(1..5, start, fn group, pair ->
      {x0, x1} =
        @rotations
        |> elem(rem(group + 1, 2))
        |> Enum.reduce(pair, fn r, {x0, x1} ->
          x0 = Nx.add(x0, x1)
          {x0, x1 |> rotate_left(r) |> Nx.bitwise_xor(x0)}
        end)

      {Nx.add(x0, elem(schedule, rem(group, 3))),
       x1 |> Nx.add(elem(schedule, rem(group + 1, 3))) |> Nx.add(group)}
    end)
  end

  defp rotate_left(x, r), do: Nx.bitwise_or(Nx.left_shift(x, r), Nx.right_shift(x, 32 - r))

  # `Nx.size(shape)` 32-bit words for `key`: the counters 0..n-1 (padded with a 0 to an
  # even count) hashed as pairs (i, i + n/2)
  defp hash_counters(key, shape) do
    n = Tuple.product(shape)
    half = div(n + 1, 2)

    counters =
      if rem(n, 2) == 0,
        do: Nx.iota({n}, type: {:u, 32}),
        else: Nx.concatenate([Nx.iota({n}, type: {:u, 32}), Nx.tensor([0], type: {:u, 32})])

    counters = Nx.reshape(counters, {2, half})
    {x0, x1} = threefry(counters[0], counters[1], key)
    words = Nx.concatenate([x0, x1])
    words = if rem(n, 2) == 0, do: words, else: Nx.slice(words, [0], [n])
    Nx.reshape(words, shape)
  end

  # Unsigned random bits of the given width, one element per entry of `shape`: 32-bit
  # words as they come; 64-bit ones from two words (high, low); 8/16-bit ones the low bits
  defp random_bits(key, shape, 64) do
    words = key |> hash_counters({2, Tuple.product(shape)}) |> Nx.as_type({:u, 64})

    words[0]
    |> Nx.left_shift(32)
    |> Nx.bitwise_or(words[1])
    |> Nx.reshape(shape)
  end

  defp random_bits(key, shape, 32), do: hash_counters(key, shape)
  defp random_bits(key, shape, bits), do: key |> hash_counters(shape) |> Nx.as_type({:u, bits})

  ## Integers

  @doc """
  Random integers in `[min_value, max_value)` and the next key; see `randint_split/4`.

  ## Examples

      iex> {n, _key} = Nx.Random.randint(Nx.Random.key(1701), 1, 100)
      iex> n
      #Nx.Tensor<
        s64
        66
      >

      iex> {n, _key} = Nx.Random.randint(Nx.Random.key(1701), 1, 100, shape: {3, 2}, type: :u32)
      iex> n
      #Nx.Tensor<
        u32[3][2]
        [
          [9, 20],
          [19, 6],
          [71, 15]
        ]
      >
  """
  defn randint(key, min_value, max_value, opts \\ []) do
    drawn_with_next_key(key, &randint_numbers(&1, min_value, max_value, opts))
  end

  @doc """
  Random integers in `[min_value, max_value)` from `key` as it is.

  Options: `:shape` (default `{}`), `:type` (an integer type; default the merged type of
  the bounds), `:names`. Each number comes from two random words `hi` and `lo` of the
  type's width, as `(hi mod span) * (2^(w/2) mod span)^2 + lo mod span` reduced mod the
  span (`max_value - min_value`), added to `min_value`.
  """
  defn randint_split(key, min_value, max_value, opts \\ []) do
    randint_numbers(key, min_value, max_value, opts)
  end

  deftransformp randint_numbers(key, min_value, max_value, opts) do
    opts = keyword!(opts, [:names, :type, shape: {}])
    assert_key!(key)
    shape = opts[:shape]
    type = {kind, bits} = result_type(min_value, max_value, opts[:type], :integer)

    unless kind in [:u, :s] do
      raise ArgumentError, "expected integer type, got type #{inspect(type)}"
    end

    min_value = Nx.broadcast(min_value, shape)
    max_value = Nx.broadcast(max_value, shape)
    words = random_bits(key, Tuple.insert_at(shape, 0, 2), bits)
    span = Nx.as_type(Nx.subtract(max_value, min_value), {:u, bits})

    # (2^(w/2) mod span)^2 mod span, with Nx's s64 intermediate types
    multiplier =
      Nx.tensor(2 ** div(bits, 2), type: {:s, 64})
      |> Nx.remainder(span)
      |> Nx.pow(2)
      |> Nx.remainder(span)

    offset =
      words[0]
      |> Nx.remainder(span)
      |> Nx.multiply(multiplier)
      |> Nx.add(Nx.remainder(words[1], span))
      |> Nx.remainder(span)

    min_value
    |> Nx.add(offset)
    |> Nx.as_type(type)
    |> Nx.reshape(shape, names: opts[:names])
    |> constant()
  end

  ## Floats

  @doc """
  Uniform numbers in `[0, 1)`; `uniform(key, 0.0, 1.0, opts)`.
  """
  defn uniform(key, opts \\ []) do
    drawn_with_next_key(key, &uniform_numbers(&1, 0.0, 1.0, opts))
  end

  @doc """
  Uniform numbers in `[min_value, max_value)` and the next key; see `uniform_split/4`.

  ## Examples

      iex> {u, _key} = Nx.Random.uniform(Nx.Random.key(1701))
      iex> u
      #Nx.Tensor<
        f32
        0.9728643894195557
      >

      iex> {u, _key} = Nx.Random.uniform(Nx.Random.key(1701), shape: {3, 2}, type: :f16)
      iex> u
      #Nx.Tensor<
        f16[3][2]
        [
          [0.75390625, 0.6484375],
          [0.7294921875, 0.21484375],
          [0.09765625, 0.0693359375]
        ]
      >
  """
  defn uniform(key, min_value, max_value, opts \\ []) do
    drawn_with_next_key(key, &uniform_numbers(&1, min_value, max_value, opts))
  end

  @doc """
  Uniform numbers in `[min_value, max_value)` from `key` as it is.

  Options: `:shape` (default `{}`), `:type` (a float or complex type; default the merged
  type of the bounds made floating), `:names`. The random word's high bits become the
  mantissa of a number in `[1, 2)`; minus one, scaled and shifted. A complex type draws
  its real and imaginary parts as two real numbers each.
  """
  defn uniform_split(key, min_value, max_value, opts \\ []) do
    uniform_numbers(key, min_value, max_value, opts)
  end

  deftransformp uniform_numbers(key, min_value, max_value, opts) do
    assert_key!(key)
    opts = keyword!(opts, [:names, :type, shape: {}])
    type = result_type(min_value, max_value, opts[:type], :float)

    real_or_complex(type, opts[:shape], fn type, shape ->
      uniform_real(key, min_value, max_value, type, shape, opts[:names])
    end)
    |> constant()
  end

  defp uniform_real(key, min_value, max_value, {_, bits} = type, shape, names) do
    # two numbers fold into one constant, in double precision, as Nx's expressions fold them
    range =
      if is_number(min_value) and is_number(max_value),
        do:
          constant_value(constant_value(max_value, type) - constant_value(min_value, type), type),
        else: arith(:subtract, max_value, min_value, type)

    min_value = to_type(min_value, type)
    mantissa = key |> random_bits(shape, bits) |> Nx.right_shift(bits - mantissa_bits(type))

    if is_number(range) and range == 1 do
      # Nx drops the multiplication by 1. The fraction is then built as mantissa * 2^-k
      # (the same number as 1.mantissa - 1): XLA re-associates `(y - 1) + min` into
      # `y + (min - 1)`, rounding the folded constant (in f16, 1 - 2^-14 becomes 1)
      mantissa
      |> Nx.as_type(type)
      |> Nx.multiply(constant_value(2 ** -mantissa_bits(type), type))
      |> Nx.add(min_value)
    else
      one = Nx.tensor(1.0, type: type)

      mantissa
      |> Nx.bitwise_or(Nx.bitcast(one, {:u, bits}))
      |> Nx.bitcast(type)
      |> Nx.subtract(one)
      |> mul_add(range, min_value, type)
    end
    |> Nx.max(min_value)
    |> Nx.reshape(shape, names: names)
  end

  defp mantissa_bits({:f, 16}), do: 10
  defp mantissa_bits({:bf, 16}), do: 7
  defp mantissa_bits({:f, 32}), do: 23
  defp mantissa_bits({:f, 64}), do: 52

  @doc """
  Standard normal numbers; `normal(key, 0.0, 1.0, opts)`.
  """
  defn normal(key, opts \\ []) do
    drawn_with_next_key(key, &normal_numbers(&1, 0.0, 1.0, opts))
  end

  @doc """
  Normal numbers of the given mean and standard deviation, and the next key; see
  `normal_split/4`.

  ## Examples

      iex> {z, _key} = Nx.Random.normal(Nx.Random.key(42))
      iex> z
      #Nx.Tensor<
        f32
        1.3694695234298706
      >

      iex> {z, _key} = Nx.Random.normal(Nx.Random.key(42), 0, 1, shape: {3, 2}, type: :f16)
      iex> z
      #Nx.Tensor<
        f16[3][2]
        [
          [-0.32568359375, -0.77197265625],
          [0.39208984375, 0.5341796875],
          [0.270751953125, -2.080078125]
        ]
      >
  """
  defn normal(key, mean, standard_deviation, opts \\ []) do
    drawn_with_next_key(key, &normal_numbers(&1, mean, standard_deviation, opts))
  end

  @doc """
  Normal numbers from `key` as it is: `mean + standard_deviation * sqrt(2) * erf_inv(u)`,
  with `u` uniform in `(-1, 1)`.

  Options as `uniform_split/4`. A complex type draws the real and the imaginary part as
  two real normal numbers each.
  """
  defn normal_split(key, mean, standard_deviation, opts \\ []) do
    normal_numbers(key, mean, standard_deviation, opts)
  end

  deftransformp normal_numbers(key, mean, standard_deviation, opts) do
    assert_key!(key)
    opts = keyword!(opts, [:names, :type, shape: {}])
    type = result_type(mean, standard_deviation, opts[:type], :float)

    real_or_complex(type, opts[:shape], fn type, shape ->
      u = uniform_real(key, above_minus_one(type), 1, type, shape, opts[:names])
      scale_and_shift(erf_inv(u, type), standard_deviation, mean, type)
    end)
    |> constant()
  end

  # mean + standard_deviation * sqrt(2) * e, grouped and folded as Nx's expressions fold
  # them: a number (a constant of the trace) is multiplied into the constant sqrt(2) in
  # double precision, a tensor is multiplied with `e` first; a zero mean adds nothing.
  defp scale_and_shift(e, standard_deviation, mean, type) do
    sqrt2 = constant_value(:math.sqrt(2.0), type)

    scaled =
      if is_number(standard_deviation) do
        case constant_value(standard_deviation, type) do
          one when one == 1 -> arith(:multiply, sqrt2, e, type)
          c -> arith(:multiply, constant_value(c * sqrt2, type), e, type)
        end
      else
        arith(:multiply, sqrt2, arith(:multiply, standard_deviation, e, type), type)
      end

    if is_number(mean) and constant_value(mean, type) == 0 do
      scaled
    else
      # `scaled` is a product: added through mul_add's guard against a fused multiply-add
      Nx.select(Nx.is_nan(scaled), scaled, arith(:add, scaled, mean, type))
    end
  end

  # A number as a constant of this type holds it: rounded to the type, read back
  defp constant_value(number, type), do: number |> Nx.tensor(type: type) |> Nx.to_number()

  # The number just above -1 in a float type of this width (for a bf16, Nx takes f16's)
  defp above_minus_one({_, bits}) do
    <<word::size(bits)>> = <<-1.0::float-size(bits)>>
    <<value::float-size(bits)>> = <<word - 1::size(bits)>>
    value
  end

  # Giles' single-precision approximation of the inverse error function, evaluated in f64
  # and rounded to the type, as Nx's binary backend computes `Nx.erf_inv`
  @erf_inv_central [
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941
  ]
  @erf_inv_tail [
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682
  ]

  defp erf_inv(u, type) do
    f64 = {:f, 64}
    z = Nx.as_type(u, f64)
    w = z |> Nx.negate() |> Nx.add(1) |> Nx.multiply(Nx.add(z, 1)) |> Nx.log() |> Nx.negate()
    central = horner(@erf_inv_central, Nx.subtract(w, 2.5))
    tail = horner(@erf_inv_tail, Nx.subtract(Nx.sqrt(w), 3))
    p = Nx.select(Nx.less(w, 5), central, tail)
    value = Nx.multiply(p, z)
    value = Nx.select(Nx.equal(z, 1), Nx.Constants.infinity(f64), value)
    value = Nx.select(Nx.equal(z, -1), Nx.Constants.neg_infinity(f64), value)
    to_type(value, type)
  end

  defp horner([first | rest], w) do
    Enum.reduce(rest, Nx.tensor(first, type: {:f, 64}), &mul_add(&2, w, &1, {:f, 64}))
  end

  @doc """
  Gumbel numbers (`-log(-log(u))`, `u` uniform) and the next key; see `gumbel_split/2`.

  ## Examples

      iex> {g, _key} = Nx.Random.gumbel(Nx.Random.key(1))
      iex> g
      #Nx.Tensor<
        f32
        -0.7294610142707825
      >
  """
  defn gumbel(key, opts \\ []) do
    drawn_with_next_key(key, &gumbel_numbers(&1, opts))
  end

  @doc """
  Gumbel numbers from `key` as it is. Options: `:shape` (default `{}`), `:type` (a float
  type, default `:f32`).
  """
  defn gumbel_split(key, opts \\ []) do
    gumbel_numbers(key, opts)
  end

  deftransformp gumbel_numbers(key, opts) do
    opts = keyword!(opts, shape: {}, type: {:f, 32})
    type = Nx.Type.normalize!(opts[:type])

    cond do
      Nx.Type.complex?(type) ->
        raise ArgumentError, "only floating types are supported, got: #{inspect(type)}"

      not Nx.Type.float?(type) ->
        raise ArgumentError, "output type must be floating-point, got: #{inspect(type)}"

      true ->
        :ok
    end

    assert_key!(key)
    tiny = Nx.Type.smallest_positive_normal(type)

    key
    |> uniform_real(tiny, 1, type, opts[:shape], nil)
    |> log(type)
    |> Nx.negate()
    |> log(type)
    |> Nx.negate()
    |> constant()
  end

  ## Permutations and sampling

  @doc """
  Shuffles `tensor` along `:axis` (default 0) and returns `{shuffled, new_key}`. With
  `independent: true` every slice along the axis gets its own permutation.

  ## Examples

      iex> {t, _key} = Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({3, 4}, axis: 0))
      iex> t
      #Nx.Tensor<
        s64[3][4]
        [
          [2, 2, 2, 2],
          [0, 0, 0, 0],
          [1, 1, 1, 1]
        ]
      >
  """
  defn shuffle(key, tensor, opts \\ []) do
    shuffled(key, tensor, opts)
  end

  deftransformp shuffled(key, tensor, opts) do
    opts = keyword!(opts, axis: 0, independent: false)
    axis = opts[:axis]

    if opts[:independent] do
      sort_shuffle(key, tensor, axis)
    else
      positions = Nx.iota({Nx.axis_size(tensor, axis)})
      {order, key} = sort_shuffle(key, positions, 0)
      {Nx.take(tensor, order, axis: axis), key}
    end
  end

  # Sorts along `axis` by random 32-bit keys, in as many rounds as make a collision of
  # the keys unlikely (ceil(3 * log(n) / log(2^32 - 1)), with n the tensor's size)
  defp sort_shuffle(key, tensor, axis) do
    n = Nx.size(tensor)
    rounds = ceil(3 * :math.log(max(n, 1)) / :math.log(4_294_967_295))

    Enum.reduce(List.duplicate(nil, rounds), {tensor, key}, fn nil, {tensor, key} ->
      keys = split_key(key, [])
      order = Nx.argsort(random_bits(keys[1], Nx.shape(tensor), 32), axis: axis)
      {Nx.take_along_axis(tensor, order, axis: axis), keys[0]}
    end)
  end

  @doc """
  Samples from `tensor` and returns `{samples, new_key}`.

  `choice(key, tensor, opts)` samples uniformly; `choice(key, tensor, p, opts)` with the
  probabilities `p` (rank 1, one per entry along the axis). Options: `:samples` (default
  1), `:axis` (default `nil`: the tensor is flattened), `:replace` (default `true`).

  ## Examples

      iex> t = Nx.iota({4, 3})
      iex> {s, _key} = Nx.Random.choice(Nx.Random.key(1), t, samples: 4, axis: 0, replace: false)
      iex> s
      #Nx.Tensor<
        s64[4][3]
        [
          [3, 4, 5],
          [9, 10, 11],
          [6, 7, 8],
          [0, 1, 2]
        ]
      >

      iex> p = Nx.tensor([0.01, 0.1, 0.19, 0.6, 0.05, 0.05])
      iex> {s, _key} = Nx.Random.choice(Nx.Random.key(2), Nx.iota({2, 3}), p, samples: 6)
      iex> s
      #Nx.Tensor<
        s64[6]
        [3, 3, 3, 0, 3, 3]
      >
  """
  def choice(key, tensor, opts \\ [])

  def choice(key, tensor, opts) when is_list(opts), do: uniform_choice(key, tensor, opts)
  def choice(key, tensor, p), do: choice(key, tensor, p, [])

  @doc "See `choice/3`."
  defn choice(key, tensor, p, opts) do
    weighted_choice(key, tensor, p, opts)
  end

  defnp uniform_choice(key, tensor, opts) do
    {tensor, n, samples, axis, replace} = choice_setup(tensor, opts)

    if replace do
      {positions, key} = randint(key, 0, n, shape: {samples})
      {Nx.take(tensor, positions, axis: axis), key}
    else
      {shuffled, key} = shuffled(key, tensor, axis: axis)
      {Nx.slice_along_axis(shuffled, 0, samples, axis: axis), key}
    end
  end

  deftransformp weighted_choice(key, tensor, p, opts) do
    {tensor, n, samples, axis, replace} = choice_setup(tensor, opts)

    unless Nx.rank(p) == 1 do
      raise ArgumentError, "probability tensor must have rank 1, got: #{Nx.rank(p)}"
    end

    unless Nx.size(p) == Nx.axis_size(tensor, axis) do
      raise ArgumentError,
            "probability tensor of size #{Nx.size(p)} is expected to have size " <>
              "#{Nx.axis_size(tensor, axis)}"
    end

    type = Nx.type(p)

    if replace do
      # inverse transform: the first position whose running total exceeds total * (1 - u)
      cumulative = pairwise_cumulative_sum(p, type)
      keys = split_key(key, [])
      u = uniform_numbers(keys[1], 0.0, 1.0, shape: {samples}, type: type)

      r =
        arith(
          :multiply,
          cumulative[-1],
          arith(:subtract, Nx.tensor(1, type: type), u, type),
          type
        )

      below = Nx.less_equal(Nx.new_axis(cumulative, 0), Nx.new_axis(r, 1))
      positions = Nx.argmin(below, axis: 1, tie_break: :low)
      {Nx.take(tensor, positions, axis: axis), keys[0]}
    else
      # Gumbel-top-k: the smallest `samples` of -g - log(p)
      keys = split_key(key, [])
      g = gumbel_numbers(keys[1], shape: {n}, type: type)
      scores = arith(:subtract, Nx.negate(g), log(p, type), type)
      positions = scores |> Nx.argsort() |> Nx.slice_along_axis(0, samples, axis: 0)
      {Nx.take(tensor, positions, axis: axis), keys[0]}
    end
  end

  deftransformp choice_setup(tensor, opts) do
    opts = Keyword.validate!(opts, [:axis, samples: 1, replace: true])
    axis = opts[:axis] && Nx.Shape.normalize_axis(Nx.shape(tensor), opts[:axis])

    if Nx.rank(tensor) < 1 do
      raise ArgumentError, "tensor must have rank 1 or greater"
    end

    samples = opts[:samples]

    if samples < 1 do
      raise "must take at least one sample, got samples=#{samples}"
    end

    {tensor, axis} =
      if axis == nil, do: {Nx.reshape(tensor, {Nx.size(tensor)}), 0}, else: {tensor, axis}

    n = Nx.axis_size(tensor, axis)

    if not opts[:replace] and samples > n do
      raise ArgumentError, "cannot take more samples than the input size when replace: false"
    end

    {tensor, n, samples, axis, opts[:replace]}
  end

  # The running sum in the order Nx's binary backend adds (a pairwise scan: pairs summed,
  # the half-length scan of the pairs, then the elements between), rounded per addition
  defp pairwise_cumulative_sum(t, type) do
    n = Nx.axis_size(t, 0)

    if n < 2 do
      t
    else
      even = Nx.slice_along_axis(t, 0, n - 1, axis: 0, strides: 2)
      odd = Nx.slice_along_axis(t, 1, n - 1, axis: 0, strides: 2)
      scanned_odd = pairwise_cumulative_sum(arith(:add, odd, even, type), type)

      cond do
        n == 2 ->
          Nx.concatenate([even, scanned_odd])

        rem(n, 2) == 0 ->
          half = div(n, 2)

          rest =
            arith(
              :add,
              Nx.slice(scanned_odd, [0], [half - 1]),
              Nx.slice(even, [1], [half - 1]),
              type
            )

          interleave(Nx.concatenate([Nx.slice(even, [0], [1]), rest]), scanned_odd)

        true ->
          rest =
            arith(:add, scanned_odd, Nx.slice_along_axis(t, 2, n - 2, axis: 0, strides: 2), type)

          Nx.concatenate([Nx.slice(t, [0], [1]), interleave(scanned_odd, rest)])
      end
    end
  end

  defp interleave(a, b), do: [a, b] |> Nx.stack(axis: 1) |> Nx.reshape({2 * Nx.size(a)})

  ## Multivariate normal

  @doc """
  Samples of the multivariate normal distribution with the given `mean` (rank 1, size
  `n`) and `covariance` (`n x n`, positive semi-definite), and the next key; see
  `multivariate_normal_split/4`.

  ## Examples

      iex> {x, _key} = Nx.Random.multivariate_normal(Nx.Random.key(12), Nx.tensor([0]), Nx.tensor([[1]]))
      iex> x
      #Nx.Tensor<
        f32[1]
        [0.735927939414978]
      >
  """
  defn multivariate_normal(key, mean, covariance, opts \\ []) do
    drawn_with_next_key(key, &mvn_numbers(&1, mean, covariance, opts))
  end

  @doc """
  Multivariate normal samples from `key` as it is: `mean + z . A^T` with `z` standard
  normal and `A A^T = covariance`.

  Options: `:shape` (the batch shape; the result has shape `{*shape, n}`, default
  `{n}`), `:type` (a float type), `:names`, `:method` (how `A` is computed:
  `:cholesky`, the default, or `:svd` / `:eigh`, which also accept singular covariances).
  """
  defn multivariate_normal_split(key, mean, covariance, opts \\ []) do
    mvn_numbers(key, mean, covariance, opts)
  end

  deftransformp mvn_numbers(key, mean, covariance, opts) do
    assert_key!(key)
    opts = keyword!(opts, [:names, :type, :shape, method: :cholesky])
    {type, shape} = mvn_setup(mean, covariance, opts)
    mean = to_type(mean, type)
    covariance = to_type(covariance, type)
    # a 16-bit covariance is factored in f32 and the factor rounded as Nx writes the type
    work = if elem(type, 1) == 16, do: Nx.as_type(covariance, {:f, 32}), else: covariance

    factor =
      case opts[:method] do
        :cholesky ->
          Nx.LinAlg.cholesky(work)

        :svd ->
          {u, s, _vt} = Nx.LinAlg.svd(work)
          Nx.multiply(u, Nx.sqrt(s))

        :eigh ->
          {s, u} = Nx.LinAlg.eigh(work)
          Nx.multiply(u, Nx.sqrt(s))
      end

    factor = to_type(factor, type)

    z =
      key
      |> normal_numbers(0.0, 1.0, shape: shape, type: type)
      |> Nx.reshape({div(Tuple.product(shape), Nx.size(mean)), Nx.size(mean)})

    mean
    |> Nx.add(nx_dot(z, factor, type))
    |> Nx.reshape(shape, names: opts[:names])
    |> constant()
  end

  defp mvn_setup(mean, covariance, opts) do
    unless opts[:method] in [:svd, :eigh, :cholesky] do
      raise ArgumentError, "method must be one of :svd, :eigh, and :cholesky\n"
    end

    type = result_type(mean, covariance, opts[:type], :float)

    case type do
      {:c, _} ->
        raise ArgumentError,
              "Nx.multivariate_normal_split/4 does not support complex inputs"

      _ ->
        :ok
    end

    if Nx.rank(mean) != 1 do
      raise ArgumentError,
            "expected mean to have rank 1, got tensor with rank #{Nx.rank(mean)}\n"
    end

    n = Nx.size(mean)

    if Nx.rank(covariance) != 2 do
      raise ArgumentError,
            "expected covariance to have rank 2, got tensor with rank #{Nx.rank(covariance)}\n"
    end

    if Nx.axis_size(covariance, 0) != Nx.axis_size(covariance, 1) do
      raise ArgumentError,
            "expected covariance to be a square matrix, got tensor with shape " <>
              "#{inspect(Nx.shape(covariance))}\n"
    end

    if Nx.axis_size(covariance, 0) != n do
      raise ArgumentError,
            "expected mean and covariance to have the same dimensions, got #{n} and " <>
              "#{Nx.axis_size(covariance, 0)}\n"
    end

    shape =
      case opts[:shape] do
        nil -> {n}
        batch when is_tuple(batch) -> Tuple.insert_at(batch, tuple_size(batch), n)
        _ -> raise ArgumentError, "shape must be a tuple of integers\n"
      end

    {type, shape}
  end

  ## Arithmetic as Nx's binary backend rounds it

  defp constant(t), do: Nx.Defn.Kernel.stop_grad(t)

  # The functions without `_split`: draw with the second key of a split, return the first
  deftransformp drawn_with_next_key(key, draw) do
    keys = split_key(key, [])
    {draw.(keys[1]), keys[0]}
  end

  defp assert_key!(key) do
    case Nx.shape(key) do
      {2} ->
        :ok

      shape ->
        raise ArgumentError,
              "expected key to have shape {2}, got tensor with shape #{inspect(shape)}"
    end

    case Nx.type(key) do
      {:u, 32} ->
        :ok

      type ->
        raise ArgumentError,
              "expected key with 32-bit unsigned integer type, got key with type #{inspect(type)}"
    end
  end

  defp keyword!(opts, keys), do: Nx.Defn.Kernel.keyword!(opts, keys)

  # The type given as an option, or the merged type of the two values (made floating for
  # the float distributions)
  defp result_type(_left, _right, type, _kind) when type != nil, do: Nx.Type.normalize!(type)

  defp result_type(left, right, nil, kind) do
    merged = Nx.Type.merge(Nx.type(left), Nx.type(right))
    if kind == :float, do: Nx.Type.to_floating(merged), else: merged
  end

  defp real_or_complex({:c, _} = type, shape, fun) do
    parts = fun.(Nx.Type.to_real(type), Tuple.insert_at(shape, tuple_size(shape), 2))
    rank = tuple_size(shape)
    real = parts |> Nx.slice_along_axis(0, 1, axis: rank) |> Nx.squeeze(axes: [rank])
    imag = parts |> Nx.slice_along_axis(1, 1, axis: rank) |> Nx.squeeze(axes: [rank])
    # Nx 0.7.2 combines the parts with a dot against `[1, i]`, a c64 constant, so the
    # result is c64 for both complex types (a :c128 request rounds its f64 parts to f32)
    real |> Nx.complex(imag) |> Nx.as_type(Nx.Type.merge(Nx.type(real), {:c, 64}))
  end

  defp real_or_complex({kind, _} = type, shape, fun) when kind in [:f, :bf], do: fun.(type, shape)

  defp real_or_complex(type, _shape, _fun) do
    raise ArgumentError, "expected float or complex type, got type #{inspect(type)}"
  end

  # Nx's binary backend computes each float operation on doubles and rounds the result to
  # the tensor's type; a bf16 is written as the f32 rounding with its low half dropped.
  defp to_type(x, {:bf, 16}) do
    x
    |> Nx.as_type({:f, 32})
    |> Nx.bitcast({:u, 32})
    |> Nx.right_shift(16)
    |> Nx.as_type({:u, 16})
    |> Nx.bitcast({:bf, 16})
  end

  # f64 -> f16 in one rounding, as Erlang writes a half float (XLA converts through f32,
  # which can round twice): the f32 step rounds to odd, so no false tie reaches f16
  defp to_type(%Nx.Tensor{type: {:f, 64}} = x, {:f, 16}) do
    single = Nx.as_type(x, {:f, 32})
    back = Nx.as_type(single, {:f, 64})
    away = Nx.greater(Nx.abs(back), Nx.abs(x))
    inexact = Nx.not_equal(back, x)

    single
    |> Nx.bitcast({:u, 32})
    |> Nx.subtract(Nx.as_type(away, {:u, 32}))
    |> Nx.bitwise_or(Nx.as_type(inexact, {:u, 32}))
    |> Nx.bitcast({:f, 32})
    |> Nx.as_type({:f, 16})
  end

  defp to_type(x, type), do: Nx.as_type(x, type)

  # + - * of two values of `type` rounded once (bf16 through f32, exact for these)
  defp arith(op, a, b, {:bf, 16} = type) do
    f32 = {:f, 32}
    to_type(apply(Nx, op, [Nx.as_type(a, f32), Nx.as_type(b, f32)]), type)
  end

  defp arith(op, a, b, type), do: apply(Nx, op, [to_type(a, type), to_type(b, type)])

  # round(round(x * a) + b): XLA's CPU code generator contracts a product that feeds only
  # an addition into one fused multiply-add (rounded once), where Nx rounds twice. A
  # second use of the product (the NaN test, which selects the same value) keeps it apart.
  defp mul_add(x, a, b, type) do
    product = arith(:multiply, x, a, type)
    Nx.select(Nx.is_nan(product), product, arith(:add, product, b, type))
  end

  # z . factor^T summed on doubles and rounded once to the type, as Nx's binary backend sums
  # (an f32 sum in f32 rounds every partial sum, or none with fused multiply-adds)
  defp nx_dot(z, factor, {:f, 64}), do: Nx.dot(z, [1], factor, [1])

  defp nx_dot(z, factor, type) do
    f64 = {:f, 64}
    Nx.dot(Nx.as_type(z, f64), [1], Nx.as_type(factor, f64), [1]) |> to_type(type)
  end

  # log computed on doubles and rounded to the type
  defp log(x, {:f, 64}), do: Nx.log(x)
  defp log(x, type), do: x |> Nx.as_type({:f, 64}) |> Nx.log() |> to_type(type)
end
