defmodule NxJax.Timeline do
  @moduledoc """
  Timestamps of a call's way through the runtime, for `make bench-timeline`
  (`bench/step_timeline.exs`, docs/BENCHMARKS.md "Where a training step's time goes").

  `mark/1` is compiled in only when `NX_JAX_TIMELINE=1` is set while nx_jax compiles (this
  module then recompiles itself, and the modules that use it, whenever the variable changes);
  otherwise it compiles to nothing, so a normal build carries no trace of it. Compiled in, a
  mark records `{clock, tag}` in the table `start/0` made, when there is one: the clock is
  `:os.perf_counter(:nanosecond)`, the OS's monotonic clock, which the worker's marks
  (`py_backend/timeline.py`, `time.perf_counter_ns`) read too, so both sides' marks fall on
  one time line.
  """

  @on System.get_env("NX_JAX_TIMELINE") == "1"
  @table :nx_jax_timeline

  @doc false
  def __mix_recompile__?, do: System.get_env("NX_JAX_TIMELINE") == "1" != @on

  @doc "Whether marks are compiled in."
  def compiled_in?, do: @on

  @doc "Records `tag` with the time, in a build with marks compiled in; nothing otherwise."
  defmacro mark(tag) do
    if @on, do: quote(do: NxJax.Timeline.record(unquote(tag))), else: :ok
  end

  @doc """
  Starts recording: a public table owned by the calling process (which must outlive the
  recording). Raises in a build without marks, whose recording would stay empty.
  """
  def start do
    unless @on do
      raise RuntimeError,
            "nx_jax was compiled without timeline marks: compile it with NX_JAX_TIMELINE=1 " <>
              "(make bench-timeline does)"
    end

    :ets.new(@table, [:public, :named_table, :duplicate_bag, write_concurrency: true])
    :ok
  end

  @doc false
  def record(tag) do
    :ets.insert(@table, {:os.perf_counter(:nanosecond), tag})
  rescue
    # (no recording under way)
    ArgumentError -> true
  end

  @doc "Stops recording: every `{clock_ns, tag}` recorded, in time order."
  def stop do
    marks = :ets.tab2list(@table)
    :ets.delete(@table)
    Enum.sort(marks)
  end
end
