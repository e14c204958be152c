defprotocol Nx.LazyContainer do
  @moduledoc """
  Data that `defn` and `Nx.Defn.jit/2` take as arguments without building every tensor first.

  `traverse(data, acc, fun)` calls `fun.(template, make_tensor, acc)` once per tensor the
  data stands for: `template` is its type and shape (`Nx.to_template/1`), `make_tensor` a
  function of no arguments that returns it. It returns `{container, acc}`, where `container`
  (an `Nx.Container`) holds the first elements that `fun` returned. A compiled function calls
  `make_tensor` only for the tensors its graph reads.

  Every `Nx.Container` is a lazy container whose tensors already exist (this protocol falls
  back to it), so only data that computes or loads its tensors needs an implementation:

      defmodule Checkpoint do
        defstruct [:path]

        defimpl Nx.LazyContainer do
          def traverse(%Checkpoint{path: path}, acc, fun) do
            fun.(Nx.template({1024}, :f32), fn -> load_weights(path) end, acc)
          end
        end
      end
  """
  @fallback_to_any true

  @doc "Walks `data`; see the module documentation."
  @spec traverse(t(), acc, (Nx.Tensor.t(), (() -> Nx.Tensor.t()), acc -> {term(), acc})) ::
          {Nx.Container.t(), acc}
        when acc: term()
  def traverse(data, acc, fun)
end

defimpl Nx.LazyContainer, for: [Integer, Float, Complex, Nx.Tensor] do
  def traverse(leaf, acc, fun), do: fun.(Nx.to_template(leaf), fn -> Nx.to_tensor(leaf) end, acc)
end

defimpl Nx.LazyContainer, for: Any do
  def traverse(data, acc, fun) do
    Nx.Container.traverse(data, acc, &Nx.LazyContainer.traverse(&1, &2, fun))
  end
end
