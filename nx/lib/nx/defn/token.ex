defmodule Nx.Defn.Token do
  @moduledoc """
  A token of hooks inside `defn` (`Nx.Defn.Kernel.create_token/0`, `hook_token/3,4`,
  `attach_token/2`).

  A token collects hooks on values that the result of a `defn` need not use. Nothing runs
  when a hook is added; `attach_token(token, expr)` returns `expr` with the token's hooks
  attached, and they fire, in the order they were added, when `expr` is computed.

  `hooks` lists them newest first (as in Nx), each a map with `:expr` (the hooked tensor
  or container), `:name` (an atom, or `nil` for a hook given only a function) and
  `:callback` (the default function, or `nil`). Only compilers read it.

  ## Examples

      iex> token = Nx.Defn.Token.new()
      iex> token = Nx.Defn.Token.add_hook(token, Nx.tensor(1), :first, nil)
      iex> token = Nx.Defn.Token.add_hook(token, Nx.tensor(2), :second, nil)
      iex> Enum.map(token.hooks, & &1.name)
      [:second, :first]
      iex> inspect(token)
      "#Nx.Defn.Token<[:second, :first]>"
  """

  alias Nx.Defn.{Composite, Expr}

  defstruct hooks: []

  @type hook :: %{expr: term, name: atom | nil, callback: (term -> term) | nil}
  @type t :: %__MODULE__{hooks: [hook]}

  @doc "An empty token."
  @spec new() :: t
  def new, do: %__MODULE__{}

  @doc """
  Adds a hook on `expr` (a tensor or a container of tensors) named `name` with the default
  function `callback` (either may be `nil`, not both unless the jit's `hooks:` option is to
  give the function).
  """
  @spec add_hook(t, term, atom | nil, (term -> term) | nil) :: t
  def add_hook(%__MODULE__{} = token, expr, name, callback)
      when is_atom(name) and (is_function(callback, 1) or is_nil(callback)) do
    %{token | hooks: [%{expr: expr, name: name, callback: callback} | token.hooks]}
  end

  @doc """
  Returns `expr` (a tensor or a container) with the hooks of `token` attached: every tensor
  of it becomes an `:attach_token` node over the hooked values and itself, so computing any
  of them computes the hooked values first and fires their hooks, oldest first. The hooks
  are built once per call, so a container fires each hook once.

  Outside a trace, when neither `expr` nor a hooked value is an expression, the hooks'
  functions run at once, in order, and `expr` comes back unchanged.
  """
  @spec attach(t, term) :: term
  def attach(%__MODULE__{hooks: []}, expr), do: expr

  def attach(%__MODULE__{hooks: hooks}, expr) do
    hooked =
      hooks
      |> Enum.reverse()
      |> Enum.flat_map(fn %{expr: value, name: name, callback: callback} ->
        Composite.flatten_list([Expr.hook(value, name, callback)])
      end)
      |> Enum.filter(&Expr.expr?/1)

    # outside a trace the hooks ran at once (Nx.Defn.Expr.hook/3): nothing to attach
    if hooked == [] do
      expr
    else
      Composite.traverse(expr, fn leaf ->
        leaf = Expr.to_expr(leaf)
        %{Expr.expr(:attach_token, hooked ++ [leaf], %{}, leaf) | names: leaf.names}
      end)
    end
  end

  defimpl Inspect do
    import Inspect.Algebra

    def inspect(%{hooks: hooks}, opts) do
      concat([
        color("#Nx.Defn.Token<", :map, opts),
        to_doc(Enum.map(hooks, & &1.name), opts),
        color(">", :map, opts)
      ])
    end
  end
end
