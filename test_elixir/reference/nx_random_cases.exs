# Cases for the Nx.Random reference data (see nx_random_reference.exs).
#
# Evaluating this file gives a list of {name, code} string pairs. Each
# `code` is an Elixir expression (several expressions separated by `;` or
# newlines are allowed; the last one is the value) written against the
# public Nx 0.7.2 API only. Its value is a tensor or a tuple of tensors
# (tuples may nest). Vectorized results are devectorized inside the code,
# so every leaf is a plain tensor.
#
# Names are unique, made of [a-z0-9_] and stable: tests look cases up by
# name, so rename only together with the .tsv.
#
# The list is built with plain comprehensions so that it can be read in
# order: key, split, fold_in, threefry, uniform, normal, randint, shuffle,
# choice, gumbel, multivariate_normal, names/vectorized, doc examples,
# errors.

type_name = fn t -> t |> to_string() |> String.trim_leading(":") end

shape_name = fn
  {} -> "scalar"
  shape -> shape |> Tuple.to_list() |> Enum.join("x")
end

shape_code = fn shape -> inspect(shape) end

# ---------------------------------------------------------------- key/1

int_seeds = [
  {"0", "0"},
  {"12", "12"},
  {"44", "44"},
  {"1701", "1701"},
  {"999999999999", "999999999999"},
  {"2pow32", "2 ** 32"},
  {"2pow32_plus5", "2 ** 32 + 5"},
  {"minus1", "-1"},
  {"minus12345678901", "-12345678901"},
  {"2pow63_minus1", "2 ** 63 - 1"},
  {"2pow63", "2 ** 63"},
  {"minus2pow63", "-(2 ** 63)"},
  {"2pow64", "2 ** 64"},
  {"2pow64_plus7", "2 ** 64 + 7"}
]

key_cases =
  for({n, s} <- int_seeds, do: {"key_int_#{n}", "Nx.Random.key(#{s})"}) ++
    for(
      {n, s} <- int_seeds,
      n in [
        "0",
        "44",
        "999999999999",
        "2pow32_plus5",
        "minus1",
        "minus12345678901",
        "2pow63_minus1"
      ],
      do: {"key_tensor_s64_#{n}", "Nx.Random.key(Nx.tensor(#{s}, type: :s64))"}
    ) ++
    for(
      {n, s} <- [
        {"0", "0"},
        {"999999999999", "999999999999"},
        {"2pow63", "2 ** 63"},
        {"2pow64_minus1", "2 ** 64 - 1"}
      ],
      do: {"key_tensor_u64_#{n}", "Nx.Random.key(Nx.tensor(#{s}, type: :u64))"}
    ) ++
    [
      {"key_tensor_u32_max", "Nx.Random.key(Nx.tensor(4294967295, type: :u32))"},
      {"key_tensor_s32_minus1", "Nx.Random.key(Nx.tensor(-1, type: :s32))"},
      {"key_tensor_u8_200", "Nx.Random.key(Nx.tensor(200, type: :u8))"},
      {"key_tensor_s8_minus3", "Nx.Random.key(Nx.tensor(-3, type: :s8))"},
      # Not a scalar: Nx stacks along a new leading axis without complaint.
      {"key_tensor_vector_123", "Nx.Random.key(Nx.tensor([1, 2, 3]))"},
      {"key_tensor_vector_u64",
       "Nx.Random.key(Nx.tensor([0, 4294967296, 18446744073709551615], type: :u64))"},
      {"key_float_seed", "Nx.Random.key(1.5)"},
      {"key_float_tensor_seed", "Nx.Random.key(Nx.tensor(3.0))"}
    ]

# ---------------------------------------------------------------- split/1,2

split_cases =
  [
    {"split_default_key0", "Nx.Random.split(Nx.Random.key(0))"}
  ] ++
    for(
      parts <- [1, 2, 3, 4, 5, 12],
      seed <- [42],
      do:
        {"split_parts#{parts}_key#{seed}",
         "Nx.Random.split(Nx.Random.key(#{seed}), parts: #{parts})"}
    ) ++
    [
      {"split_of_split_row",
       "Nx.Random.split(Nx.Random.split(Nx.Random.key(7), parts: 3)[2], parts: 3)"},
      {"split_explicit_key_max",
       "Nx.Random.split(Nx.tensor([4294967295, 4294967295], type: :u32), parts: 3)"}
    ]

# ---------------------------------------------------------------- fold_in/2

fold_cases = [
  {"fold_in_key42_0", "Nx.Random.fold_in(Nx.Random.key(42), 0)"},
  {"fold_in_key42_2pow40", "Nx.Random.fold_in(Nx.Random.key(42), 2 ** 40)"},
  {"fold_in_key42_minus1", "Nx.Random.fold_in(Nx.Random.key(42), -1)"},
  {"fold_in_key7_2x2", "Nx.Random.fold_in(Nx.Random.key(7), Nx.tensor([[1, 99], [1234, 13]]))"},
  {"fold_in_key42_2x2_s64_big",
   "Nx.Random.fold_in(Nx.Random.key(42), Nx.tensor([[0, 2 ** 40], [-5, 2 ** 33 + 3]]))"},
  {"fold_in_key42_u32_scalar", "Nx.Random.fold_in(Nx.Random.key(42), Nx.tensor(99, type: :u32))"},
  {"fold_in_key3_u32_vector",
   "Nx.Random.fold_in(Nx.Random.key(3), Nx.tensor([0, 1, 2, 4294967295, 7], type: :u32))"},
  {"fold_in_key3_u32_2x2",
   "Nx.Random.fold_in(Nx.Random.key(3), Nx.tensor([[5, 6], [7, 8]], type: :u32))"},
  {"fold_in_key3_u8_vector",
   "Nx.Random.fold_in(Nx.Random.key(3), Nx.tensor([1, 2, 255], type: :u8))"},
  {"fold_in_key999999999999_u64",
   "Nx.Random.fold_in(Nx.Random.key(999999999999), Nx.tensor([18446744073709551615, 4294967296], type: :u64))"}
]

# ------------------------------------------------- threefry2x32_20_concat/2

threefry_cases = [
  # Random123 known-answer vectors for threefry2x32 with 20 rounds.
  {"threefry_kat_pi",
   "Nx.Random.threefry2x32_20_concat(Nx.tensor([[0x243F6A88], [0x85A308D3]], type: :u32), Nx.tensor([0x13198A2E, 0x03707344], type: :u32))"},
  {"threefry_kat_zeros",
   "Nx.Random.threefry2x32_20_concat(Nx.tensor([[0], [0]], type: :u32), Nx.tensor([0, 0], type: :u32))"},
  {"threefry_kat_ones",
   "Nx.Random.threefry2x32_20_concat(Nx.tensor([[0xFFFFFFFF], [0xFFFFFFFF]], type: :u32), Nx.tensor([0xFFFFFFFF, 0xFFFFFFFF], type: :u32))"},
  {"threefry_2x4_key1701",
   "Nx.Random.threefry2x32_20_concat(Nx.tensor([[0, 1, 2, 3], [4, 5, 6, 7]], type: :u32), Nx.Random.key(1701))"},
  {"threefry_2x3_mixed",
   "Nx.Random.threefry2x32_20_concat(Nx.tensor([[1, 4294967295, 123456789], [2, 3, 987654321]], type: :u32), Nx.tensor([0xDEADBEEF, 0x12345678], type: :u32))"},
  {"threefry_2x2x2",
   "Nx.Random.threefry2x32_20_concat(Nx.iota({2, 2, 2}, type: :u32), Nx.Random.key(5))"}
]

# ---------------------------------------------------------------- uniform

float_types = [:f16, :bf16, :f32, :f64, :c64, :c128]

uniform_cases =
  for(
    type <- float_types,
    shape <- [{}, {3, 2}],
    do:
      {"uniform_#{type_name.(type)}_#{shape_name.(shape)}",
       "Nx.Random.uniform(Nx.Random.key(1701), shape: #{shape_code.(shape)}, type: #{inspect(type)})"}
  ) ++
    for(
      {type, shape} <- [
        {:f32, {1}},
        {:f32, {5}},
        {:f32, {7}},
        {:f16, {7}},
        {:c64, {7}},
        {:f32, {4, 5, 3}},
        {:bf16, {4, 5, 3}},
        {:f32, {1000}},
        {:f64, {1000}},
        {:f16, {1000}},
        {:bf16, {1000}}
      ],
      do:
        {"uniform_#{type_name.(type)}_#{shape_name.(shape)}",
         "Nx.Random.uniform(Nx.Random.key(1701), shape: #{shape_code.(shape)}, type: #{inspect(type)})"}
    ) ++
    [
      {"uniform_default_key0", "Nx.Random.uniform(Nx.Random.key(0))"},
      {"uniform_type_tuple_f32",
       "Nx.Random.uniform(Nx.Random.key(3), shape: {4}, type: {:f, 32})"},
      {"uniform_ints_0_100", "Nx.Random.uniform(Nx.Random.key(44), 0, 100, shape: {5})"},
      {"uniform_ints_0_100_f64",
       "Nx.Random.uniform(Nx.Random.key(44), 0, 100, shape: {5}, type: :f64)"},
      {"uniform_floats_0_100", "Nx.Random.uniform(Nx.Random.key(44), 0.0, 100.0, shape: {5})"},
      {"uniform_floats_0_100_bf16",
       "Nx.Random.uniform(Nx.Random.key(44), 0.0, 100.0, shape: {5}, type: :bf16)"},
      {"uniform_neg_3_5_2_25", "Nx.Random.uniform(Nx.Random.key(44), -3.5, 2.25, shape: {3, 2})"},
      {"uniform_neg_3_5_2_25_f64",
       "Nx.Random.uniform(Nx.Random.key(44), -3.5, 2.25, shape: {3, 2}, type: :f64)"},
      {"uniform_neg_3_5_2_25_c64",
       "Nx.Random.uniform(Nx.Random.key(44), -3.5, 2.25, shape: {3}, type: :c64)"},
      {"uniform_tensor_bounds_bf16",
       "Nx.Random.uniform(Nx.Random.key(44), Nx.tensor(-1.0, type: :bf16), Nx.tensor(5.0, type: :bf16), shape: {6})"},
      {"uniform_tensor_bounds_f64",
       "Nx.Random.uniform(Nx.Random.key(44), Nx.tensor(-1.0, type: :f64), Nx.tensor(5.0, type: :f64), shape: {6})"},
      {"uniform_tensor_bounds_bf16_f16_mixed",
       "Nx.Random.uniform(Nx.Random.key(44), Nx.tensor(-1.0, type: :bf16), Nx.tensor(5.0, type: :f16), shape: {6})"},
      {"uniform_tensor_bounds_f64_type_f32",
       "Nx.Random.uniform(Nx.Random.key(44), Nx.tensor(-1.0, type: :f64), Nx.tensor(5.0, type: :f64), shape: {6}, type: :f32)"},
      {"uniform_tensor_bounds_u8",
       "Nx.Random.uniform(Nx.Random.key(44), Nx.tensor(0, type: :u8), Nx.tensor(10, type: :u8), shape: {4})"},
      {"uniform_broadcast_bounds_3_shape_2x3",
       "Nx.Random.uniform(Nx.Random.key(44), Nx.tensor([0.0, 10.0, -5.0]), Nx.tensor([1.0, 20.0, 5.0]), shape: {2, 3})"},
      {"uniform_broadcast_min_3_shape_2x3_f64",
       "Nx.Random.uniform(Nx.Random.key(44), Nx.tensor([0.0, 10.0, -5.0], type: :f64), 100.0, shape: {2, 3})"},
      {"uniform_min_greater_than_max",
       "Nx.Random.uniform(Nx.Random.key(44), 5.0, 1.0, shape: {4})"},
      {"uniform_f16_overflowing_span",
       "Nx.Random.uniform(Nx.Random.key(44), -60000.0, 60000.0, shape: {4}, type: :f16)"},
      {"uniform_split_f64_0_100",
       "Nx.Random.uniform_split(Nx.Random.key(44), 0.0, 100.0, type: :f64)"},
      {"uniform_split_f16_3x2",
       "Nx.Random.uniform_split(Nx.Random.key(1701), 0.0, 1.0, shape: {3, 2}, type: :f16)"},
      {"uniform_split_c128_2",
       "Nx.Random.uniform_split(Nx.Random.key(1701), -1.0, 1.0, shape: {2}, type: :c128)"},
      {"uniform_split_f32_1000",
       "Nx.Random.uniform_split(Nx.Random.key(9), -3.5, 2.25, shape: {1000})"},
      {"uniform_split_row_of_split",
       "Nx.Random.uniform_split(Nx.Random.split(Nx.Random.key(9), parts: 4)[3], 0.0, 1.0, shape: {3})"}
    ]

# ---------------------------------------------------------------- normal

normal_cases =
  for(
    type <- float_types,
    shape <- [{}, {3, 2}],
    do:
      {"normal_#{type_name.(type)}_#{shape_name.(shape)}",
       "Nx.Random.normal(Nx.Random.key(42), shape: #{shape_code.(shape)}, type: #{inspect(type)})"}
  ) ++
    for(
      {type, shape} <- [
        {:f32, {5}},
        {:bf16, {7}},
        {:f16, {4, 5, 3}},
        {:f32, {1000}},
        {:f64, {1000}},
        {:f16, {1000}},
        {:bf16, {1000}}
      ],
      do:
        {"normal_#{type_name.(type)}_#{shape_name.(shape)}",
         "Nx.Random.normal(Nx.Random.key(42), shape: #{shape_code.(shape)}, type: #{inspect(type)})"}
    ) ++
    [
      {"normal_default_key0", "Nx.Random.normal(Nx.Random.key(0))"},
      {"normal_10_5_f32_1000", "Nx.Random.normal(Nx.Random.key(1337), 10, 5, shape: {1000})"},
      {"normal_10_5_f64_1000",
       "Nx.Random.normal(Nx.Random.key(1337), 10, 5, shape: {1000}, type: :f64)"},
      {"normal_10_5_bf16_7",
       "Nx.Random.normal(Nx.Random.key(1337), 10, 5, shape: {7}, type: :bf16)"},
      {"normal_m2_5_0_3_3x2", "Nx.Random.normal(Nx.Random.key(1337), -2.5, 0.3, shape: {3, 2})"},
      {"normal_m2_5_0_3_f16_3x2",
       "Nx.Random.normal(Nx.Random.key(1337), -2.5, 0.3, shape: {3, 2}, type: :f16)"},
      {"normal_m2_5_0_3_c64_3",
       "Nx.Random.normal(Nx.Random.key(1337), -2.5, 0.3, shape: {3}, type: :c64)"},
      {"normal_tensor_params_f64",
       "Nx.Random.normal(Nx.Random.key(5), Nx.tensor(1.0, type: :f64), Nx.tensor(2.0, type: :f64), shape: {4})"},
      {"normal_tensor_params_bf16",
       "Nx.Random.normal(Nx.Random.key(5), Nx.tensor(1.0, type: :bf16), Nx.tensor(2.0, type: :bf16), shape: {4})"},
      {"normal_broadcast_mean_3_shape_2x3",
       "Nx.Random.normal(Nx.Random.key(5), Nx.tensor([0.0, 100.0, -100.0]), Nx.tensor([1.0, 0.1, 10.0]), shape: {2, 3})"},
      # No final reshape in normal: a {3} mean with the default shape {} gives {3}.
      {"normal_mean_3_shape_scalar",
       "Nx.Random.normal(Nx.Random.key(5), Nx.tensor([1.0, 2.0, 3.0]), 5.0)"},
      {"normal_split_f32", "Nx.Random.normal_split(Nx.Random.key(42), 0.0, 1.0)"},
      {"normal_split_f64_5",
       "Nx.Random.normal_split(Nx.Random.key(42), 10, 5, shape: {5}, type: :f64)"},
      {"normal_split_c128_2",
       "Nx.Random.normal_split(Nx.Random.key(42), -2.5, 0.3, shape: {2}, type: :c128)"},
      {"normal_split_f32_1000",
       "Nx.Random.normal_split(Nx.Random.key(8), -2.5, 0.3, shape: {1000})"}
    ]

# ---------------------------------------------------------------- randint

int_types = [:u8, :u16, :u32, :u64, :s8, :s16, :s32, :s64]

randint_cases =
  for(
    {type, shape} <- [{:u8, {}}, {:s8, {}}, {:u64, {}}, {:s64, {}}, {:u16, {5}}, {:s32, {5}}],
    do:
      {"randint_#{type_name.(type)}_0_10_#{shape_name.(shape)}",
       "Nx.Random.randint(Nx.Random.key(1701), 0, 10, shape: #{shape_code.(shape)}, type: #{inspect(type)})"}
  ) ++
    for(
      type <- int_types,
      do:
        {"randint_#{type_name.(type)}_1_100_3x2",
         "Nx.Random.randint(Nx.Random.key(1701), 1, 100, shape: {3, 2}, type: #{inspect(type)})"}
    ) ++
    for(
      type <- [:s8, :s32, :s64],
      do:
        {"randint_#{type_name.(type)}_m50_50_5",
         "Nx.Random.randint(Nx.Random.key(1701), -50, 50, shape: {5}, type: #{inspect(type)})"}
    ) ++
    for(
      type <- [:u32, :s64, :u64],
      do:
        {"randint_#{type_name.(type)}_0_2pow31_5",
         "Nx.Random.randint(Nx.Random.key(1701), 0, 2 ** 31, shape: {5}, type: #{inspect(type)})"}
    ) ++
    [
      {"randint_s32_0_2pow31_minus1_5",
       "Nx.Random.randint(Nx.Random.key(1701), 0, 2 ** 31 - 1, shape: {5}, type: :s32)"},
      {"randint_s64_m2pow40_2pow40_5",
       "Nx.Random.randint(Nx.Random.key(1701), -(2 ** 40), 2 ** 40, shape: {5}, type: :s64)"},
      {"randint_u64_0_2pow40_5",
       "Nx.Random.randint(Nx.Random.key(1701), 0, 2 ** 40, shape: {5}, type: :u64)"},
      {"randint_s64_m2pow40_2pow40_1000",
       "Nx.Random.randint(Nx.Random.key(1701), -(2 ** 40), 2 ** 40, shape: {1000})"},
      {"randint_s64_0_10_1000", "Nx.Random.randint(Nx.Random.key(3), 0, 10, shape: {1000})"},
      {"randint_u8_0_10_1000",
       "Nx.Random.randint(Nx.Random.key(3), 0, 10, shape: {1000}, type: :u8)"},
      {"randint_s16_m50_50_1000",
       "Nx.Random.randint(Nx.Random.key(3), -50, 50, shape: {1000}, type: :s16)"},
      # Out-of-type ranges: whatever the wrapping arithmetic gives.
      {"randint_u8_m50_50_wrap_5",
       "Nx.Random.randint(Nx.Random.key(1701), -50, 50, shape: {5}, type: :u8)"},
      {"randint_s8_0_200_wrap_5",
       "Nx.Random.randint(Nx.Random.key(1701), 0, 200, shape: {5}, type: :s8)"},
      {"randint_u64_m2pow40_2pow40_wrap_5",
       "Nx.Random.randint(Nx.Random.key(1701), -(2 ** 40), 2 ** 40, shape: {5}, type: :u64)"},
      {"randint_tensor_bounds_u8",
       "Nx.Random.randint(Nx.Random.key(1701), Nx.tensor(1, type: :u8), Nx.tensor(200, type: :u8), shape: {5})"},
      {"randint_tensor_bounds_u8_vector",
       "Nx.Random.randint(Nx.Random.key(1701), Nx.tensor([0, 10, 100, 250], type: :u8), Nx.tensor([2, 20, 200, 255], type: :u8), shape: {4})"},
      {"randint_tensor_bounds_u8_s32_mixed",
       "Nx.Random.randint(Nx.Random.key(1701), Nx.tensor(1, type: :u8), Nx.tensor(1000, type: :s32), shape: {5})"},
      {"randint_tensor_bounds_s8_broadcast_2x3",
       "Nx.Random.randint(Nx.Random.key(1701), Nx.tensor([-100, 0, 50], type: :s8), Nx.tensor(100, type: :s8), shape: {2, 3})"},
      {"randint_split_u32_1_100_3x2",
       "Nx.Random.randint_split(Nx.Random.key(1701), 1, 100, shape: {3, 2}, type: :u32)"},
      {"randint_split_u64_0_2pow40_5",
       "Nx.Random.randint_split(Nx.Random.key(1701), 0, 2 ** 40, shape: {5}, type: :u64)"},
      {"randint_split_s16_1000",
       "Nx.Random.randint_split(Nx.Random.key(11), -50, 50, shape: {1000}, type: :s16)"}
    ]

# ---------------------------------------------------------------- shuffle

shuffle_cases =
  for(
    n <- [1, 2, 10, 100, 1625, 1626, 2000],
    do: {"shuffle_iota_#{n}", "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({#{n}}))"}
  ) ++
    [
      {"shuffle_iota_10_independent",
       "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({10}), independent: true)"},
      {"shuffle_iota_2000_independent",
       "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({2000}), independent: true)"},
      {"shuffle_iota_10_f32", "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({10}, type: :f32))"},
      {"shuffle_iota_10_u8", "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({10}, type: :u8))"},
      {"shuffle_3x4_axis0", "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({3, 4}), axis: 0)"},
      {"shuffle_3x4_axis1", "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({3, 4}), axis: 1)"},
      {"shuffle_3x4_axis_minus1",
       "Nx.Random.shuffle(Nx.Random.key(42), Nx.iota({3, 4}), axis: -1)"},
      {"shuffle_3x4_axis0_independent",
       "Nx.Random.shuffle(Nx.Random.key(10), Nx.iota({3, 4}), axis: 0, independent: true)"},
      {"shuffle_3x4_axis1_independent",
       "Nx.Random.shuffle(Nx.Random.key(10), Nx.iota({3, 4}), axis: 1, independent: true)"},
      {"shuffle_10x20_axis0", "Nx.Random.shuffle(Nx.Random.key(3), Nx.iota({10, 20}), axis: 0)"},
      {"shuffle_10x20_axis1_independent",
       "Nx.Random.shuffle(Nx.Random.key(3), Nx.iota({10, 20}), axis: 1, independent: true)"},
      # 40 * 50 = 2000 elements: the round count comes from the whole size.
      {"shuffle_40x50_axis1_independent",
       "Nx.Random.shuffle(Nx.Random.key(3), Nx.iota({40, 50}), axis: 1, independent: true)"},
      {"shuffle_40x50_axis0", "Nx.Random.shuffle(Nx.Random.key(3), Nx.iota({40, 50}), axis: 0)"},
      {"shuffle_2x3x4_axis2_independent",
       "Nx.Random.shuffle(Nx.Random.key(3), Nx.iota({2, 3, 4}), axis: 2, independent: true)"},
      {"shuffle_2x1_axis1", "Nx.Random.shuffle(Nx.Random.key(3), Nx.iota({2, 1}), axis: 1)"}
    ]

# ---------------------------------------------------------------- choice

choice_cases =
  for(
    samples <- [1, 3, 6],
    replace <- [true, false],
    do:
      {"choice_iota6_samples#{samples}_replace_#{replace}",
       "Nx.Random.choice(Nx.Random.key(2), Nx.iota({6}), samples: #{samples}, replace: #{replace})"}
  ) ++
    [
      {"choice_iota6_default", "Nx.Random.choice(Nx.Random.key(2), Nx.iota({6}))"},
      {"choice_4x3_axis1_samples5",
       "Nx.Random.choice(Nx.Random.key(1), Nx.iota({4, 3}), samples: 5, axis: 1)"},
      {"choice_4x3_axis1_samples2_replace_false",
       "Nx.Random.choice(Nx.Random.key(1), Nx.iota({4, 3}), samples: 2, axis: 1, replace: false)"},
      {"choice_4x3_axis_nil_samples12_replace_false",
       "Nx.Random.choice(Nx.Random.key(1), Nx.iota({4, 3}), samples: 12, replace: false)"},
      {"choice_f32_100_samples10",
       "Nx.Random.choice(Nx.Random.key(5), Nx.iota({100}, type: :f32), samples: 10)"},
      {"choice_p_f64_axis1_samples3",
       "Nx.Random.choice(Nx.Random.key(1), Nx.iota({4, 3}), Nx.tensor([0.1, 0.7, 0.2], type: :f64), samples: 3, axis: 1)"},
      {"choice_p_f64_axis1_samples3_replace_false",
       "Nx.Random.choice(Nx.Random.key(1), Nx.iota({4, 3}), Nx.tensor([0.1, 0.7, 0.2], type: :f64), samples: 3, axis: 1, replace: false)"},
      {"choice_p_f64_axis_nil_samples20",
       "Nx.Random.choice(Nx.Random.key(2), Nx.iota({2, 3}), Nx.tensor([0.01, 0.1, 0.19, 0.6, 0.05, 0.05], type: :f64), samples: 20)"},
      {"choice_p_f64_axis_nil_samples4_replace_false",
       "Nx.Random.choice(Nx.Random.key(2), Nx.iota({2, 3}), Nx.tensor([0.01, 0.1, 0.19, 0.6, 0.05, 0.05], type: :f64), samples: 4, replace: false)"},
      {"choice_p_f32_axis0_samples5",
       "Nx.Random.choice(Nx.Random.key(7), Nx.iota({4, 3}), Nx.tensor([0.25, 0.25, 0.4, 0.1]), samples: 5, axis: 0)"},
      # Probabilities that do not sum to 1 (choice scales by the last cumulative sum).
      {"choice_p_unnormalized_samples8",
       "Nx.Random.choice(Nx.Random.key(7), Nx.iota({5}), Nx.tensor([1.0, 2.0, 0.0, 4.0, 1.0]), samples: 8)"},
      {"choice_p_with_zero_replace_false",
       "Nx.Random.choice(Nx.Random.key(7), Nx.iota({5}), Nx.tensor([0.2, 0.2, 0.0, 0.4, 0.2]), samples: 5, replace: false)"}
    ]

# ---------------------------------------------------------------- gumbel

# Nx 0.7.2's gumbel passes :type to Nx.Type.float?/1 without normalizing it,
# so only tuple types work (type: :f32 raises FunctionClauseError, recorded
# below under errors). The types are therefore written as tuples here.
float_tuple = %{f16: {:f, 16}, bf16: {:bf, 16}, f32: {:f, 32}, f64: {:f, 64}}

gumbel_cases =
  for(
    type <- [:f16, :bf16, :f32, :f64],
    shape <- [{}, {2, 3}, {1000}],
    do:
      {"gumbel_#{type_name.(type)}_#{shape_name.(shape)}",
       "Nx.Random.gumbel(Nx.Random.key(1), shape: #{shape_code.(shape)}, type: #{inspect(float_tuple[type])})"}
  ) ++
    [
      {"gumbel_split_default", "Nx.Random.gumbel_split(Nx.Random.key(1))"}
    ] ++
    for(
      type <- [:f16, :bf16, :f32, :f64],
      do:
        {"gumbel_split_#{type_name.(type)}_2x3",
         "Nx.Random.gumbel_split(Nx.Random.key(3), shape: {2, 3}, type: #{inspect(float_tuple[type])})"}
    )

# ------------------------------------------------------ multivariate_normal

mvn_mean3 = "Nx.tensor([1.0, -2.0, 0.5])"
mvn_cov3 = "Nx.tensor([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.5]])"

mvn_cases =
  for(
    method <- [:cholesky, :svd, :eigh],
    type <- [:f32, :f64, :f16, :bf16],
    do:
      {"mvn_#{method}_#{type_name.(type)}_3",
       "Nx.Random.multivariate_normal(Nx.Random.key(12), #{mvn_mean3}, #{mvn_cov3}, method: #{inspect(method)}, type: #{inspect(type)})"}
  ) ++
    for(
      method <- [:cholesky, :svd, :eigh],
      type <- [:f32],
      do:
        {"mvn_#{method}_#{type_name.(type)}_3x2x3",
         "Nx.Random.multivariate_normal(Nx.Random.key(12), #{mvn_mean3}, #{mvn_cov3}, method: #{inspect(method)}, type: #{inspect(type)}, shape: {3, 2})"}
    ) ++
    [
      {"mvn_cholesky_bf16_3x2x2",
       "Nx.Random.multivariate_normal(Nx.Random.key(12), Nx.tensor([0, 0]), Nx.tensor([[1, 0], [0, 1]]), shape: {3, 2}, type: :bf16)"},
      {"mvn_f64_inputs_inferred",
       "Nx.Random.multivariate_normal(Nx.Random.key(12), Nx.tensor([1.0, 2.0], type: :f64), Nx.tensor([[1.0, 0.3], [0.3, 2.0]], type: :f64))"},
      {"mvn_svd_singular",
       "Nx.Random.multivariate_normal(Nx.Random.key(12), Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 1.0], [1.0, 1.0]]), method: :svd, shape: {4})"},
      {"mvn_eigh_singular",
       "Nx.Random.multivariate_normal(Nx.Random.key(12), Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 1.0], [1.0, 1.0]]), method: :eigh, shape: {4})"},
      {"mvn_split_cholesky_f32",
       "Nx.Random.multivariate_normal_split(Nx.Random.key(12), #{mvn_mean3}, #{mvn_cov3})"},
      {"mvn_split_svd_f64_2",
       "Nx.Random.multivariate_normal_split(Nx.Random.key(12), #{mvn_mean3}, #{mvn_cov3}, method: :svd, type: :f64, shape: {2})"},
      {"mvn_split_eigh_f32_2x2",
       "Nx.Random.multivariate_normal_split(Nx.Random.key(12), #{mvn_mean3}, #{mvn_cov3}, method: :eigh, shape: {2, 2})"}
    ]

# -------------------------------------------------- names and vectorization

misc_cases = [
  {"names_uniform_2x3", "Nx.Random.uniform(Nx.Random.key(4), shape: {2, 3}, names: [:x, :y])"},
  {"names_uniform_split_2x3_partial",
   "Nx.Random.uniform_split(Nx.Random.key(4), 0.0, 1.0, shape: {2, 3}, names: [nil, :y])"},
  {"names_normal_2x3",
   "Nx.Random.normal(Nx.Random.key(4), 0.0, 1.0, shape: {2, 3}, names: [:x, :y])"},
  {"names_randint_2x3",
   "Nx.Random.randint(Nx.Random.key(4), 0, 10, shape: {2, 3}, names: [:x, :y])"},
  {"names_mvn_2x2",
   "Nx.Random.multivariate_normal(Nx.Random.key(4), Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]), shape: {2}, names: [:batch, :dim])"},
  {"names_shuffle_named_input",
   "Nx.Random.shuffle(Nx.Random.key(4), Nx.iota({3, 2}, names: [:rows, :cols]))"},
  {"vectorized_split",
   "Nx.Random.split(Nx.vectorize(Nx.Random.split(Nx.Random.key(0)), :k)) |> Nx.devectorize()"},
  {"vectorized_uniform",
   "{u, k} = Nx.Random.uniform(Nx.vectorize(Nx.Random.split(Nx.Random.key(0), parts: 3), :k), shape: {2}); {Nx.devectorize(u), Nx.devectorize(k)}"},
  {"vectorized_normal",
   "{u, k} = Nx.Random.normal(Nx.vectorize(Nx.Random.split(Nx.Random.key(0), parts: 3), :k), shape: {2}); {Nx.devectorize(u), Nx.devectorize(k)}"},
  {"vectorized_randint",
   "{u, k} = Nx.Random.randint(Nx.vectorize(Nx.Random.split(Nx.Random.key(0), parts: 2), :k), 0, 100, shape: {3}); {Nx.devectorize(u), Nx.devectorize(k)}"},
  {"vectorized_fold_in",
   "Nx.Random.fold_in(Nx.vectorize(Nx.Random.split(Nx.Random.key(0), parts: 2), :k), 5) |> Nx.devectorize()"},
  {"chain_uniform_twice",
   "{_, k} = Nx.Random.uniform(Nx.Random.key(21)); Nx.Random.uniform(k, shape: {3})"}
]

# ------------------------------------------------ the iex> examples of the docs

doc_cases = [
  {"doc_moduledoc_key12", "Nx.Random.key(12)"},
  {"doc_moduledoc_uniform_key12",
   "key = Nx.Random.key(12); {uniform, _new_key} = Nx.Random.uniform(key); uniform"},
  {"doc_key_999999999999", "Nx.Random.key(999999999999)"},
  {"doc_split_key1701", "key = Nx.Random.key(1701); Nx.Random.split(key)"},
  {"doc_split_parts4", "key = Nx.Random.key(999999999999); Nx.Random.split(key, parts: 4)"},
  {"doc_fold_in_99", "key = Nx.Random.key(42); Nx.Random.fold_in(key, 99)"},
  {"doc_fold_in_1234", "key = Nx.Random.key(42); Nx.Random.fold_in(key, 1234)"},
  {"doc_fold_in_2x2",
   "key = Nx.Random.key(42); Nx.Random.fold_in(key, Nx.tensor([[1, 99], [1234, 13]]))"},
  {"doc_randint_1_100",
   "key = Nx.Random.key(1701); {randint, _new_key} = Nx.Random.randint(key, 1, 100); randint"},
  {"doc_randint_3x2_u32",
   "key = Nx.Random.key(1701); {randint, _new_key} = Nx.Random.randint(key, 1, 100, shape: {3, 2}, type: :u32); randint"},
  {"doc_uniform",
   "key = Nx.Random.key(1701); {uniform, _new_key} = Nx.Random.uniform(key); uniform"},
  {"doc_uniform_f16_3x2",
   "key = Nx.Random.key(1701); {uniform, _new_key} = Nx.Random.uniform(key, shape: {3, 2}, type: :f16); uniform"},
  {"doc_uniform_c64_2x2",
   "key = Nx.Random.key(1701); {uniform, _new_key} = Nx.Random.uniform(key, shape: {2, 2}, type: :c64); uniform"},
  {"doc_normal", "key = Nx.Random.key(42); {normal, _new_key} = Nx.Random.normal(key); normal"},
  {"doc_normal_f16_3x2",
   "key = Nx.Random.key(42); {normal, _new_key} = Nx.Random.normal(key, 0, 1, shape: {3, 2}, type: :f16); normal"},
  {"doc_normal_c64_2x2",
   "key = Nx.Random.key(42); {normal, _new_key} = Nx.Random.normal(key, 0, 1, shape: {2, 2}, type: :c64); normal"},
  {"doc_normal_mean_std_1000",
   "key = Nx.Random.key(1337); {normal, _new_key} = Nx.Random.normal(key, 10, 5, shape: {1_000}); {Nx.mean(normal), Nx.standard_deviation(normal)}"},
  {"doc_mvn_1",
   "key = Nx.Random.key(12); {multivariate_normal, _new_key} = Nx.Random.multivariate_normal(key, Nx.tensor([0]), Nx.tensor([[1]])); multivariate_normal"},
  {"doc_mvn_2",
   "key = Nx.Random.key(12); {multivariate_normal, _new_key} = Nx.Random.multivariate_normal(key, Nx.tensor([0, 0]), Nx.tensor([[1, 0], [0, 1]])); multivariate_normal"},
  {"doc_mvn_1_f16_3x2",
   "key = Nx.Random.key(12); {multivariate_normal, _new_key} = Nx.Random.multivariate_normal(key, Nx.tensor([0]), Nx.tensor([[1]]), shape: {3, 2}, type: :f16); multivariate_normal"},
  {"doc_mvn_2_3x2",
   "key = Nx.Random.key(12); {multivariate_normal, _new_key} = Nx.Random.multivariate_normal(key, Nx.tensor([0, 0]), Nx.tensor([[1, 0], [0, 1]]), shape: {3, 2}); multivariate_normal"},
  {"doc_shuffle_axis0",
   "key = Nx.Random.key(42); {shuffled, _new_key} = Nx.Random.shuffle(key, Nx.iota({3, 4}, axis: 0)); shuffled"},
  {"doc_shuffle_independent_axis1",
   "key = Nx.Random.key(10); {shuffled, _new_key} = Nx.Random.shuffle(key, Nx.iota({3, 4}, axis: 1), independent: true, axis: 1); shuffled"},
  {"doc_choice_axis0",
   "k = Nx.Random.key(1); t = Nx.iota({4, 3}); {result, _key} = Nx.Random.choice(k, t, samples: 4, axis: 0); result"},
  {"doc_choice_axis0_replace_false",
   "k = Nx.Random.key(1); t = Nx.iota({4, 3}); {result, _key} = Nx.Random.choice(k, t, samples: 4, axis: 0, replace: false); result"},
  {"doc_choice_flat",
   "k = Nx.Random.key(2); t = Nx.iota({3, 2}); {result, _key} = Nx.Random.choice(k, t); result"},
  {"doc_choice_flat_samples6_replace_false",
   "k = Nx.Random.key(2); t = Nx.iota({3, 2}); {result, _key} = Nx.Random.choice(k, t, samples: 6, replace: false); result"},
  {"doc_choice_p_axis1",
   "k = Nx.Random.key(1); t = Nx.iota({4, 3}); p = Nx.tensor([0.1, 0.7, 0.2]); {result, _key} = Nx.Random.choice(k, t, p, samples: 3, axis: 1); result"},
  {"doc_choice_p_axis1_replace_false",
   "k = Nx.Random.key(1); t = Nx.iota({4, 3}); p = Nx.tensor([0.1, 0.7, 0.2]); {result, _key} = Nx.Random.choice(k, t, p, samples: 3, axis: 1, replace: false); result"},
  {"doc_choice_p_flat",
   "k = Nx.Random.key(2); t = Nx.iota({2, 3}); p = Nx.tensor([0.01, 0.1, 0.19, 0.6, 0.05, 0.05]); {result, _key} = Nx.Random.choice(k, t, p); result"},
  {"doc_choice_p_flat_samples6",
   "k = Nx.Random.key(2); t = Nx.iota({2, 3}); p = Nx.tensor([0.01, 0.1, 0.19, 0.6, 0.05, 0.05]); {result, _key} = Nx.Random.choice(k, t, p, samples: 6); result"},
  {"doc_choice_p_flat_samples6_replace_false",
   "k = Nx.Random.key(2); t = Nx.iota({2, 3}); p = Nx.tensor([0.01, 0.1, 0.19, 0.6, 0.05, 0.05]); {result, _key} = Nx.Random.choice(k, t, p, samples: 6, replace: false); result"},
  {"doc_gumbel", "{result, _key} = Nx.Random.gumbel(Nx.Random.key(1)); result"},
  {"doc_gumbel_2x3", "{result, _key} = Nx.Random.gumbel(Nx.Random.key(1), shape: {2, 3}); result"}
]

# ---------------------------------------------------------------- errors

k = "Nx.Random.key(1)"

error_cases = [
  {"error_key_shape_3", "Nx.Random.split(Nx.tensor([1, 2, 3], type: :u32))"},
  {"error_key_shape_scalar", "Nx.Random.uniform(Nx.tensor(1, type: :u32))"},
  {"error_key_shape_2x2", "Nx.Random.normal(Nx.tensor([[1, 2], [3, 4]], type: :u32))"},
  {"error_key_type_s64", "Nx.Random.split(Nx.tensor([1, 2]))"},
  {"error_key_type_u64", "Nx.Random.uniform(Nx.tensor([0, 1], type: :u64))"},
  {"error_key_type_f32", "Nx.Random.fold_in(Nx.tensor([0.0, 1.0]), 3)"},
  {"error_key_type_s32_randint", "Nx.Random.randint_split(Nx.tensor([0, 1], type: :s32), 0, 10)"},
  {"error_key_shape_gumbel_split", "Nx.Random.gumbel_split(Nx.tensor([1, 2, 3], type: :u32))"},
  {"error_key_shape_shuffle",
   "Nx.Random.shuffle(Nx.tensor([1, 2, 3], type: :u32), Nx.iota({4}))"},
  {"error_fold_in_float_data", "Nx.Random.fold_in(#{k}, 1.5)"},
  {"error_split_parts0", "Nx.Random.split(#{k}, parts: 0)"},
  {"error_split_unknown_option", "Nx.Random.split(#{k}, part: 3)"},
  {"error_randint_type_f32", "Nx.Random.randint(#{k}, 0, 10, type: :f32)"},
  {"error_randint_float_bounds", "Nx.Random.randint(#{k}, 0.0, 10.0)"},
  {"error_randint_split_type_c64", "Nx.Random.randint_split(#{k}, 0, 10, type: :c64)"},
  {"error_randint_unknown_option", "Nx.Random.randint(#{k}, 0, 10, shape_: {2})"},
  {"error_randint_bad_type", "Nx.Random.randint(#{k}, 0, 10, type: :s7)"},
  {"error_uniform_type_s32", "Nx.Random.uniform(#{k}, type: :s32)"},
  {"error_uniform_type_u8_bounds", "Nx.Random.uniform(#{k}, 0, 10, type: :u8)"},
  {"error_uniform_split_type_s64", "Nx.Random.uniform_split(#{k}, 0.0, 1.0, type: :s64)"},
  {"error_uniform_unknown_option", "Nx.Random.uniform(#{k}, shape_: {2})"},
  {"error_uniform_split_unknown_option", "Nx.Random.uniform_split(#{k}, 0.0, 1.0, axis: 0)"},
  {"error_uniform_bounds_shape3_scalar_shape",
   "Nx.Random.uniform(#{k}, Nx.tensor([1.0, 2.0, 3.0]), 5.0)"},
  {"error_uniform_c64_names", "Nx.Random.uniform(#{k}, shape: {2}, type: :c64, names: [:x])"},
  {"error_normal_type_s32", "Nx.Random.normal(#{k}, type: :s32)"},
  {"error_normal_split_type_u8", "Nx.Random.normal_split(#{k}, 0.0, 1.0, type: :u8)"},
  {"error_normal_unknown_option", "Nx.Random.normal(#{k}, 0.0, 1.0, shape_: {2})"},
  {"error_normal_c64_names",
   "Nx.Random.normal(#{k}, 0.0, 1.0, shape: {2}, type: :c64, names: [:x])"},
  {"error_gumbel_type_atom_f32", "Nx.Random.gumbel(#{k}, type: :f32)"},
  {"error_gumbel_type_atom_bf16", "Nx.Random.gumbel(#{k}, shape: {2}, type: :bf16)"},
  {"error_gumbel_split_type_atom_f64", "Nx.Random.gumbel_split(#{k}, type: :f64)"},
  {"error_gumbel_type_s32", "Nx.Random.gumbel(#{k}, type: :s32)"},
  {"error_gumbel_type_tuple_s32", "Nx.Random.gumbel(#{k}, type: {:s, 32})"},
  {"error_gumbel_type_tuple_c64", "Nx.Random.gumbel(#{k}, type: {:c, 64})"},
  {"error_gumbel_type_c64", "Nx.Random.gumbel(#{k}, type: :c64)"},
  {"error_gumbel_split_type_u8", "Nx.Random.gumbel_split(#{k}, type: :u8)"},
  {"error_gumbel_unknown_option", "Nx.Random.gumbel(#{k}, shape_: {2})"},
  {"error_gumbel_names_option", "Nx.Random.gumbel(#{k}, shape: {2}, names: [:x])"},
  {"error_shuffle_unknown_option", "Nx.Random.shuffle(#{k}, Nx.iota({4}), axes: [0])"},
  {"error_shuffle_axis_out_of_range", "Nx.Random.shuffle(#{k}, Nx.iota({4}), axis: 1)"},
  {"error_choice_samples_gt_size_no_replace",
   "Nx.Random.choice(#{k}, Nx.iota({5}), samples: 6, replace: false)"},
  {"error_choice_axis_samples_gt_size_no_replace",
   "Nx.Random.choice(#{k}, Nx.iota({4, 3}), samples: 4, axis: 1, replace: false)"},
  {"error_choice_p_samples_gt_size_no_replace",
   "Nx.Random.choice(#{k}, Nx.iota({3}), Nx.tensor([0.2, 0.3, 0.5]), samples: 4, replace: false)"},
  {"error_choice_samples0", "Nx.Random.choice(#{k}, Nx.iota({5}), samples: 0)"},
  {"error_choice_scalar_tensor", "Nx.Random.choice(#{k}, Nx.tensor(3))"},
  {"error_choice_unknown_option", "Nx.Random.choice(#{k}, Nx.iota({5}), sample: 2)"},
  {"error_choice_axis_out_of_range", "Nx.Random.choice(#{k}, Nx.iota({5}), axis: 2)"},
  {"error_choice_p_rank2",
   "Nx.Random.choice(#{k}, Nx.iota({4}), Nx.tensor([[0.25, 0.25], [0.25, 0.25]]))"},
  {"error_choice_p_rank0", "Nx.Random.choice(#{k}, Nx.iota({4}), Nx.tensor(1.0))"},
  {"error_choice_p_wrong_size", "Nx.Random.choice(#{k}, Nx.iota({4}), Nx.tensor([0.5, 0.5]))"},
  {"error_choice_p_wrong_size_axis",
   "Nx.Random.choice(#{k}, Nx.iota({4, 3}), Nx.tensor([0.25, 0.25, 0.25, 0.25]), axis: 1)"},
  {"error_mvn_mean_rank2",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([[0.0, 0.0]]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]))"},
  {"error_mvn_mean_rank0",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor(0.0), Nx.tensor([[1.0]]))"},
  {"error_mvn_cov_rank1",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0]), Nx.tensor([1.0, 1.0]))"},
  {"error_mvn_cov_rank3",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0]), Nx.tensor([[[1.0]]]))"},
  {"error_mvn_cov_not_square",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))"},
  {"error_mvn_dim_mismatch",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0, 0.0]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]))"},
  {"error_mvn_bad_method",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]), method: :qr)"},
  {"error_mvn_shape_not_tuple",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]), shape: 3)"},
  {"error_mvn_type_c64",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]), type: :c64)"},
  {"error_mvn_complex_inputs",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0], type: :c64), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]))"},
  {"error_mvn_type_s32",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]), type: :s32)"},
  {"error_mvn_unknown_option",
   "Nx.Random.multivariate_normal(#{k}, Nx.tensor([0.0, 0.0]), Nx.tensor([[1.0, 0.0], [0.0, 1.0]]), shape_: {2})"},
  {"error_mvn_split_bad_method",
   "Nx.Random.multivariate_normal_split(#{k}, Nx.tensor([0.0]), Nx.tensor([[1.0]]), method: :lu)"}
]

key_cases ++
  split_cases ++
  fold_cases ++
  threefry_cases ++
  uniform_cases ++
  normal_cases ++
  randint_cases ++
  shuffle_cases ++
  choice_cases ++ gumbel_cases ++ mvn_cases ++ misc_cases ++ doc_cases ++ error_cases
