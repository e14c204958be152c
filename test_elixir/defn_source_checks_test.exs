defmodule NxJax.DefnSourceChecksTest do
  # What Nx 0.7.2's defn refuses in the source, with its messages: patterns in heads and `=`,
  # local calls of functions that are not defn or transforms (when the module compiles), and
  # remote calls of plain functions (when the defn is traced).
  use ExUnit.Case, async: true

  defp compile(source), do: Code.compile_string(source, "checked_source.exs")

  defp compile_error(source) do
    error = assert_raise CompileError, fn -> compile(source) end
    Exception.message(error)
  end

  test "arguments are variables, tuples, maps or structs" do
    message =
      compile_error("""
      defmodule NxJax.SourceChecks.Literal do
        import Nx.Defn
        defn add(x, :square), do: x
      end
      """)

    assert message =~
             "checked_source.exs:3: only variables, tuples, maps, and structs are allowed " <>
               "as patterns in defn, got: :square"
  end

  test "a pattern binds each variable once, in heads and in the body" do
    assert compile_error("""
           defmodule NxJax.SourceChecks.DupArgs do
             import Nx.Defn
             defn add(a, {b, a}), do: a + b
           end
           """) =~ ~s(checked_source.exs:3: variable "a" appears twice in pattern [a, {b, a}])

    assert compile_error("""
           defmodule NxJax.SourceChecks.DupMatch do
             import Nx.Defn
             defn add(a) do
               {b, b} = a
               b
             end
           end
           """) =~ ~s(checked_source.exs:4: variable "b" appears twice in pattern {b, b})

    # `_` binds nothing
    [{module, _}] =
      compile("""
      defmodule NxJax.SourceChecks.Underscores do
        import Nx.Defn
        defn first(_, {a, _, _}), do: a * 2
      end
      """)

    assert module.first(1, {Nx.tensor(3), 4, 5}) == Nx.tensor(6)
  end

  test "local calls are to defn, defnp or transforms of the module" do
    assert compile_error("""
           defmodule NxJax.SourceChecks.Undefined do
             import Nx.Defn

             defn add(a, b) do
               do_add(a, b)
             end
           end
           """) =~ "checked_source.exs:5: undefined function do_add/2 (there is no such import)"

    assert compile_error("""
           defmodule NxJax.SourceChecks.PlainLocal do
             import Nx.Defn

             defn add(a, b) do
               do_add(a, b)
             end

             defp do_add(a, b), do: a + b
           end
           """) =~
             "checked_source.exs:5: cannot use function do_add/2 inside defn because it " <>
               "was not defined with defn"

    [{module, _}] =
      compile("""
      defmodule NxJax.SourceChecks.Allowed do
        import Nx.Defn

        defn add(a, b, opts \\\\ []), do: helper(a, opts) + other(b)
        defnp other(b), do: b * 10
        deftransformp helper(a, opts), do: Nx.multiply(a, Keyword.get(opts, :scale, 1))
        # (Kernel's byte_size/1 in a transform: a defn body has Nx.Defn.Kernel only, as in Nx)
        deftransformp three, do: byte_size("ab" <> "c")
        defn bits(a), do: add(a, 1) |> Nx.add(three())
      end
      """)

    assert module.add(1, 2) == Nx.tensor(21)
    assert module.add(1, 2, scale: 3) == Nx.tensor(23)
    assert module.bits(1) == Nx.tensor(14)
  end

  test "the functions given to hooks are plain Elixir, as in Nx" do
    [{module, _}] =
      compile("""
      defmodule NxJax.SourceChecks.Hooks do
        import Nx.Defn

        defp send_to_self(value), do: send(self(), value)

        defn hooked(a) do
          a
          |> hook(:captured, &send_to_self({:captured, &1}))
          |> hook(:plain, fn value -> send(self(), {:plain, Nx.to_number(value)}) end)
          |> Nx.add(1)
          |> then(fn expr -> send(self(), {:traced, expr.shape}) && expr end)
        end
      end
      """)

    assert module.hooked(Nx.tensor(2)) == Nx.tensor(3)
    assert_received {:traced, {}}
    assert_received {:captured, tensor}
    assert tensor == Nx.tensor(2)
    assert_received {:plain, 2}
  end

  test "remote calls of plain functions raise when traced, with Nx's hint for IO" do
    [{module, _}] =
      compile("""
      defmodule NxJax.SourceChecks.Remote do
        import Nx.Defn

        def plain(a, b), do: Nx.add(a, b)
        defn twice(a), do: a * 2
        deftransform scale(a), do: Nx.multiply(a, 3)

        defn calls_plain(a, b), do: NxJax.SourceChecks.Remote.plain(a, b)
        defn calls_io(a), do: IO.inspect(a)
        defn calls_unknown(a), do: NxJax.SourceChecks.Remote.unknown(a)
        defn calls_defn(a), do: a |> __MODULE__.twice() |> NxJax.SourceChecks.Remote.scale()
      end
      """)

    assert_raise RuntimeError,
                 "cannot invoke NxJax.SourceChecks.Remote.plain/2 inside defn because it was " <>
                   "not defined with defn",
                 fn -> module.calls_plain(1, 2) end

    assert_raise RuntimeError,
                 "cannot invoke IO.inspect/1 inside defn because it was not defined with defn. " <>
                   "To print the runtime value of a tensor, use print_value/2. " <>
                   "To print the tensor expression, use print_expr/2",
                 fn -> module.calls_io(1) end

    assert_raise UndefinedFunctionError,
                 ~r/NxJax.SourceChecks.Remote.unknown\/1 is undefined/,
                 fn ->
                   module.calls_unknown(1)
                 end

    assert module.calls_defn(Nx.tensor(2)) == Nx.tensor(12)
  end
end
