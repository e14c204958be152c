defmodule NxJax.NxOptionsTest do
  # Every public Nx / Nx.LinAlg function that takes options refuses an unknown one with the
  # error real Nx 0.7.2 raises (its wording and its list of keys, in its order). Before, many
  # accepted anything: Nx.sum(t, axis: 1), a typo for axes:, silently summed everything.
  # The reference is test_elixir/reference/nx_0.7.2_unknown_options.tsv, produced by running
  # these same calls against real Nx 0.7.2.
  use ExUnit.Case, async: true

  @reference Path.join(__DIR__, "reference/nx_0.7.2_unknown_options.tsv")
  @external_resource @reference

  # where we knowingly differ from Nx 0.7.2 (docs/COMPATIBILITY.md): a key Nx accepts that
  # we do not implement is refused rather than ignored
  @differs %{}

  # (functions missing here or in Nx 0.7.2 are called through apply/3, which compiles quietly)
  defp calls do
    v = Nx.tensor([1.0, 2.0, 3.0, 4.0])
    m = Nx.tensor([[2.0, 1.0], [1.0, 3.0]])
    i = Nx.tensor([[0], [1]])

    [
      all: fn o -> Nx.all(v, o) end,
      all_close: fn o -> Nx.all_close(v, v, o) end,
      any: fn o -> Nx.any(v, o) end,
      argmax: fn o -> Nx.argmax(v, o) end,
      argmin: fn o -> Nx.argmin(v, o) end,
      argsort: fn o -> Nx.argsort(v, o) end,
      broadcast: fn o -> Nx.broadcast(v, {2, 4}, o) end,
      broadcast_vectors: fn o -> Nx.broadcast_vectors([v, v], o) end,
      concatenate: fn o -> Nx.concatenate([v, v], o) end,
      conv: fn o -> Nx.conv(Nx.iota({1, 1, 4}, type: :f32), Nx.iota({1, 1, 2}, type: :f32), o) end,
      covariance: fn o -> Nx.covariance(m, o) end,
      cumulative_max: fn o -> Nx.cumulative_max(v, o) end,
      cumulative_min: fn o -> Nx.cumulative_min(v, o) end,
      cumulative_product: fn o -> Nx.cumulative_product(v, o) end,
      cumulative_sum: fn o -> Nx.cumulative_sum(v, o) end,
      devectorize: fn o -> Nx.devectorize(Nx.vectorize(m, :x), o) end,
      diff: fn o -> Nx.diff(v, o) end,
      eye: fn o -> Nx.eye(2, o) end,
      fft: fn o -> Nx.fft(v, o) end,
      fft2: fn o -> Nx.fft2(m, o) end,
      fill: fn o -> Nx.fill(v, 1.0, o) end,
      flatten: fn o -> Nx.flatten(m, o) end,
      from_binary: fn o -> Nx.from_binary(<<1, 2>>, :u8, o) end,
      gather: fn o -> Nx.gather(v, i, o) end,
      ifft: fn o -> Nx.ifft(v, o) end,
      ifft2: fn o -> Nx.ifft2(m, o) end,
      indexed_add: fn o -> Nx.indexed_add(v, i, Nx.tensor([1.0, 1.0]), o) end,
      indexed_put: fn o -> Nx.indexed_put(v, i, Nx.tensor([1.0, 1.0]), o) end,
      iota: fn o -> Nx.iota({2}, o) end,
      linspace: fn o -> Nx.linspace(0, 1, Keyword.merge([n: 3], o)) end,
      logsumexp: fn o -> Nx.logsumexp(v, o) end,
      make_diagonal: fn o -> Nx.make_diagonal(v, o) end,
      mean: fn o -> Nx.mean(v, o) end,
      median: fn o -> Nx.median(v, o) end,
      mode: fn o -> Nx.mode(v, o) end,
      product: fn o -> Nx.product(v, o) end,
      put_diagonal: fn o -> Nx.put_diagonal(m, Nx.tensor([1.0, 1.0]), o) end,
      reduce: fn o -> Nx.reduce(v, 0, o, &Nx.add/2) end,
      reduce_max: fn o -> Nx.reduce_max(v, o) end,
      reduce_min: fn o -> Nx.reduce_min(v, o) end,
      reflect: fn o -> Nx.reflect(v, Keyword.merge([padding_config: [{1, 1}]], o)) end,
      reshape: fn o -> Nx.reshape(v, {2, 2}, o) end,
      reshape_vectors: fn o -> Nx.reshape_vectors([v, v], o) end,
      revectorize: fn o ->
        Nx.revectorize(Nx.vectorize(m, :x), [y: 2], Keyword.merge([target_shape: {2}], o))
      end,
      reverse: fn o -> Nx.reverse(v, o) end,
      slice: fn o -> Nx.slice(v, [0], [2], o) end,
      slice_along_axis: fn o -> Nx.slice_along_axis(v, 0, 2, o) end,
      sort: fn o -> Nx.sort(v, o) end,
      split: fn o -> Nx.split(v, 2, o) end,
      squeeze: fn o -> Nx.squeeze(Nx.reshape(v, {1, 4}), o) end,
      stack: fn o -> Nx.stack([v, v], o) end,
      standard_deviation: fn o -> Nx.standard_deviation(v, o) end,
      sum: fn o -> Nx.sum(v, o) end,
      take: fn o -> Nx.take(v, Nx.tensor([0, 1]), o) end,
      take_along_axis: fn o -> Nx.take_along_axis(v, Nx.tensor([0, 1]), o) end,
      take_diagonal: fn o -> Nx.take_diagonal(m, o) end,
      template: fn o -> Nx.template({2}, :f32, o) end,
      tensor: fn o -> Nx.tensor([1, 2], o) end,
      to_batched: fn o -> Enum.to_list(Nx.to_batched(v, 2, o)) end,
      to_binary: fn o -> Nx.to_binary(v, o) end,
      to_flat_list: fn o -> Nx.to_flat_list(v, o) end,
      top_k: fn o -> Nx.top_k(v, o) end,
      transpose: fn o -> Nx.transpose(m, o) end,
      tri: fn o -> Nx.tri(2, 2, o) end,
      tril: fn o -> Nx.tril(m, o) end,
      triu: fn o -> Nx.triu(m, o) end,
      variance: fn o -> Nx.variance(v, o) end,
      weighted_mean: fn o -> Nx.weighted_mean(v, v, o) end,
      window_max: fn o -> Nx.window_max(v, {2}, o) end,
      window_mean: fn o -> Nx.window_mean(v, {2}, o) end,
      window_min: fn o -> Nx.window_min(v, {2}, o) end,
      window_product: fn o -> Nx.window_product(v, {2}, o) end,
      window_reduce: fn o -> Nx.window_reduce(v, 0, {2}, o, &Nx.add/2) end,
      window_scatter_max: fn o ->
        Nx.window_scatter_max(
          v,
          Nx.tensor([1.0, 1.0]),
          0.0,
          {2},
          Keyword.merge([strides: [2]], o)
        )
      end,
      window_scatter_min: fn o ->
        Nx.window_scatter_min(
          v,
          Nx.tensor([1.0, 1.0]),
          0.0,
          {2},
          Keyword.merge([strides: [2]], o)
        )
      end,
      window_sum: fn o -> Nx.window_sum(v, {2}, o) end,
      "LinAlg.cholesky": fn o -> apply(Nx.LinAlg, :cholesky, [m, o]) end,
      "LinAlg.determinant": fn o -> apply(Nx.LinAlg, :determinant, [m, o]) end,
      "LinAlg.eigh": fn o -> Nx.LinAlg.eigh(m, o) end,
      "LinAlg.invert": fn o -> apply(Nx.LinAlg, :invert, [m, o]) end,
      "LinAlg.lu": fn o -> Nx.LinAlg.lu(m, o) end,
      "LinAlg.norm": fn o -> apply(Nx.LinAlg, :norm, [m, o]) end,
      "LinAlg.pinv": fn o -> apply(Nx.LinAlg, :pinv, [m, o]) end,
      "LinAlg.qr": fn o -> Nx.LinAlg.qr(m, o) end,
      "LinAlg.solve": fn o -> apply(Nx.LinAlg, :solve, [m, Nx.tensor([1.0, 1.0]), o]) end,
      "LinAlg.svd": fn o -> Nx.LinAlg.svd(m, o) end,
      "LinAlg.triangular_solve": fn o ->
        Nx.LinAlg.triangular_solve(m, Nx.tensor([1.0, 1.0]), o)
      end,
      "LinAlg.matrix_power": fn o -> apply(Nx.LinAlg, :matrix_power, [m, 2, o]) end,
      "LinAlg.matrix_rank": fn o -> apply(Nx.LinAlg, :matrix_rank, [m, o]) end,
      "LinAlg.least_squares": fn o ->
        apply(Nx.LinAlg, :least_squares, [m, Nx.tensor([1.0, 1.0]), o])
      end,
      "LinAlg.schur": fn o -> apply(Nx.LinAlg, :schur, [m, o]) end
    ]
  end

  defp reference do
    for line <- File.read!(@reference) |> String.split("\n", trim: true),
        not String.starts_with?(line, "#"),
        into: %{} do
      [name, outcome] = String.split(line, "\t", parts: 2)
      {String.to_atom(name), outcome}
    end
  end

  defp outcome(call) do
    call.(zz_bogus: 1)
    "accepted"
  rescue
    e in ArgumentError -> "ArgumentError: " <> Exception.message(e)
    # (the reference keeps the first 60 characters of these)
    e in UndefinedFunctionError -> String.slice("undefined: " <> Exception.message(e), 0, 60)
  end

  test "an unknown option raises Nx 0.7.2's ArgumentError, word for word" do
    reference = reference()
    calls = calls()
    assert Enum.sort(Keyword.keys(calls)) == Enum.sort(Map.keys(reference))

    mismatches =
      for {name, call} <- calls,
          not Map.has_key?(@differs, name),
          (got = outcome(call)) != reference[name],
          do: {name, got, reference[name]}

    assert mismatches == []
  end

  test "where we differ from Nx 0.7.2, the difference is still the known one" do
    for {name, call} <- calls(), Map.has_key?(@differs, name) do
      got = outcome(call)
      refute got == reference()[name], "#{name} now matches Nx: drop it from @differs"

      if @differs[name] == "missing",
        do: assert(got =~ "undefined"),
        else: assert(got =~ "ArgumentError: unknown key")
    end
  end

  test "a typo for an option no longer changes the answer silently" do
    assert_raise ArgumentError,
                 "unknown key :axis in [axis: 1], expected one of [:axes, :keep_axes]",
                 fn -> Nx.sum(Nx.iota({2, 3}), axis: 1) end
  end

  test "logsumexp's :exp_scaling_factor and to_binary/to_flat_list's :limit" do
    # values of real Nx 0.7.2
    assert_in_delta Nx.to_number(
                      Nx.logsumexp(Nx.tensor([1, 2, 3, 4, 5, 6]), exp_scaling_factor: 0.5)
                    ),
                    5.7630462646484375,
                    1.0e-6

    scaled =
      Nx.logsumexp(Nx.tensor([[1, 2], [3, 4]]),
        exp_scaling_factor: Nx.tensor([[1], [2]]),
        axes: [1]
      )

    assert_in_delta Enum.at(Nx.to_flat_list(scaled), 0), 2.3132617473602295, 1.0e-6
    assert_in_delta Enum.at(Nx.to_flat_list(scaled), 1), 5.00640869140625, 1.0e-6

    assert Nx.to_binary(Nx.tensor([1.0, 2.0, 3.0]), limit: 2) ==
             <<1.0::float-32-native, 2.0::float-32-native>>

    assert Nx.to_flat_list(Nx.tensor([1.0, 2.0, 3.0]), limit: 5) == [1.0, 2.0, 3.0]
    assert Nx.to_flat_list(Nx.tensor([[1, 2], [3, 4]]), limit: 3) == [1, 2, 3]
  end
end
