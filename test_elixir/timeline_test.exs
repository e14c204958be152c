defmodule NxJax.TimelineTest do
  # NxJax.Timeline in a normal build (the suite's): its marks compile to nothing, so the runtime's
  # modules carry no call to it, and a recording cannot start. (bench/step_timeline.exs runs
  # the build with marks, NX_JAX_TIMELINE=1.)
  use ExUnit.Case, async: true
  require NxJax.Timeline

  test "a normal build has no marks compiled in" do
    refute NxJax.Timeline.compiled_in?()
    # the test runs without the variable, so Mix would not recompile the module for it
    refute System.get_env("NX_JAX_TIMELINE") == "1"
    refute NxJax.Timeline.__mix_recompile__?()
  end

  test "a mark compiles to nothing: no call, no table" do
    {value, _} = Code.eval_string("require NxJax.Timeline; NxJax.Timeline.mark(:anything)")
    assert value == :ok
    assert :ets.whereis(:nx_jax_timeline) == :undefined

    quoted = Macro.expand_once(quote(do: NxJax.Timeline.mark(:x)), __ENV__)
    assert quoted == :ok
  end

  test "the runtime's modules that hold marks call nothing of NxJax.Timeline" do
    for module <- [NxJax.Worker.Server, NxJax.Worker.Caller] do
      {:ok, {^module, [imports: imports]}} = :beam_lib.chunks(:code.which(module), [:imports])

      assert Enum.filter(imports, &match?({NxJax.Timeline, _, _}, &1)) == [],
             "#{inspect(module)} calls NxJax.Timeline in a normal build"
    end
  end

  test "a recording cannot start without marks, and says how to get them" do
    error = assert_raise RuntimeError, fn -> NxJax.Timeline.start() end
    assert error.message =~ "NX_JAX_TIMELINE=1"
    assert :ets.whereis(:nx_jax_timeline) == :undefined
  end
end
