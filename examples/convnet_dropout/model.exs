# A small channels-last convolutional network written by hand in plain Nx.Defn, as a user of a
# network library would write one: conv (NHWC input, HWIO kernel), ReLU, 2x2 max pool, a
# batch-normalized hidden layer whose running mean is kept in the state, dropout driven by an
# Nx.Random key kept in the state, a dense layer and softmax cross-entropy. The whole state (float
# parameters, the u32 key, an s64 step count, the running mean) is what value_and_grad
# differentiates; the integer leaves get zero gradients.
#
# Plain Nx 0.7.2 only: examples/convnet_dropout.exs trains it on nx_jax, and
# test_elixir/reference/convnet_reference.exs runs one step of it on real Nx 0.7.2.
defmodule ConvnetDropout do
  import Nx.Defn

  @channels 4
  @hidden 16
  @classes 2
  @rate 0.25

  @doc "The initial state for images of `size` x `size` x 1, from the integer `seed`."
  def init(seed, size) do
    key = Nx.Random.key(seed)

    {k1, k2, k3} =
      {Nx.Random.fold_in(key, 1), Nx.Random.fold_in(key, 2), Nx.Random.fold_in(key, 3)}

    flat = div(size - 2, 2) * div(size - 2, 2) * @channels

    %{
      params: %{
        conv_w: normal(k1, {3, 3, 1, @channels}, 0.5),
        conv_b: Nx.broadcast(0.0, {@channels}),
        hidden_w: normal(k2, {flat, @hidden}, 1.0 / :math.sqrt(flat)),
        hidden_b: Nx.broadcast(0.0, {@hidden}),
        out_w: normal(k3, {@hidden, @classes}, 1.0 / :math.sqrt(@hidden)),
        out_b: Nx.broadcast(0.0, {@classes})
      },
      key: Nx.Random.fold_in(key, 4),
      running_mean: Nx.broadcast(0.0, {@hidden}),
      count: Nx.tensor(0)
    }
  end

  defp normal(key, shape, scale) do
    {sample, _key} = Nx.Random.normal(key, 0.0, scale, shape: shape)
    sample
  end

  @doc """
  Synthetic data: `n` noisy images, each with a faint bright bar two pixels wide at its left
  edge (class 1) or its right edge (class 0).
  """
  def data(seed, n, size) do
    key = Nx.Random.key(seed)
    {noise, _} = Nx.Random.uniform(Nx.Random.fold_in(key, 1), shape: {n, size, size, 1})
    {labels, _} = Nx.Random.randint(Nx.Random.fold_in(key, 2), 0, 2, shape: {n})
    column = Nx.iota({1, 1, size, 1}, axis: 2)
    left = Nx.less(column, 2)
    right = Nx.greater_equal(column, size - 2)
    class = Nx.broadcast(Nx.reshape(labels, {n, 1, 1, 1}), {n, 1, size, 1})
    bar = Nx.select(class, left, right)
    {Nx.add(noise, Nx.multiply(bar, 0.5)), labels}
  end

  @doc "The logits and the batch mean of the hidden layer; dropout on when `train` is 1."
  defn forward(state, images, train) do
    p = state.params

    conv =
      Nx.conv(images, p.conv_w,
        input_permutation: [0, 3, 1, 2],
        kernel_permutation: [3, 2, 0, 1],
        output_permutation: [0, 3, 1, 2]
      )

    activated = Nx.max(conv + p.conv_b, 0.0)
    pooled = Nx.window_max(activated, {1, 2, 2, 1}, strides: [1, 2, 2, 1])
    {n, h, w, c} = Nx.shape(pooled)
    flat = Nx.reshape(pooled, {n, h * w * c})

    hidden = Nx.dot(flat, p.hidden_w) + p.hidden_b
    mean = Nx.mean(hidden, axes: [0])
    variance = Nx.variance(hidden, axes: [0])
    normalized = Nx.max((hidden - mean) / Nx.sqrt(variance + 1.0e-5), 0.0)

    {u, _key} = Nx.Random.uniform(state.key, shape: Nx.shape(normalized))
    keep = Nx.select(train, Nx.greater_equal(u, @rate), Nx.broadcast(1, Nx.shape(u)))
    dropped = normalized * keep / (1 - @rate * train)

    {Nx.dot(dropped, p.out_w) + p.out_b, mean}
  end

  @doc "Mean softmax cross-entropy of the batch (with dropout)."
  defn loss(state, images, labels) do
    {logits, _mean} = forward(state, images, 1)
    shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
    log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
    picked = Nx.take_along_axis(log_probs, Nx.new_axis(labels, 1), axis: 1)
    -Nx.mean(picked)
  end

  @doc "The loss and the gradient of the loss with respect to the whole state."
  defn loss_and_grad(state, images, labels) do
    value_and_grad(state, fn s -> loss(s, images, labels) end)
  end

  @doc "One training step: SGD on the parameters, a new key, the running mean, the count."
  defn step(state, images, labels) do
    {loss, grads} = loss_and_grad(state, images, labels)
    {_logits, mean} = forward(state, images, 1)
    params = state.params

    new_params = %{
      conv_w: params.conv_w - 0.1 * grads.params.conv_w,
      conv_b: params.conv_b - 0.1 * grads.params.conv_b,
      hidden_w: params.hidden_w - 0.1 * grads.params.hidden_w,
      hidden_b: params.hidden_b - 0.1 * grads.params.hidden_b,
      out_w: params.out_w - 0.1 * grads.params.out_w,
      out_b: params.out_b - 0.1 * grads.params.out_b
    }

    key = Nx.Random.split(state.key)[1]

    state = %{
      params: new_params,
      key: key,
      running_mean: 0.9 * state.running_mean + 0.1 * mean,
      count: state.count + 1
    }

    {state, loss}
  end

  @doc "Accuracy of the network without dropout."
  defn accuracy(state, images, labels) do
    {logits, _mean} = forward(state, images, 0)
    Nx.mean(Nx.equal(Nx.argmax(logits, axis: 1), labels))
  end
end
