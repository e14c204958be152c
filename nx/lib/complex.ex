defmodule Complex do
  @moduledoc """
  A complex number: the element of `{:c, 64}` and `{:c, 128}` tensors.

  Each part is a number or one of `:nan`, `:infinity`, `:neg_infinity` (Erlang floats cannot
  hold non-finite values). Only what tensors need is here: building numbers, reading their
  parts, their phase (what `Nx.phase/1` computes) and printing them the way Nx prints complex
  elements.

  ## Examples

      iex> z = Complex.new(1.0, -2.5)
      iex> {Complex.real(z), Complex.imag(z)}
      {1.0, -2.5}
      iex> inspect(z)
      "1.0-2.5i"
      iex> Nx.tensor([Complex.new(1, 2), 3]) |> Nx.to_list()
      [Complex.new(1.0, 2.0), Complex.new(3.0, 0.0)]
  """

  @enforce_keys [:re, :im]
  defstruct [:re, :im]

  @type part :: number | :nan | :infinity | :neg_infinity
  @type t :: %__MODULE__{re: part, im: part}

  @non_finite [:nan, :infinity, :neg_infinity]

  @doc """
  Builds `re + im * i`; integer parts become floats (as stored in a tensor).

  ## Examples

      iex> Complex.new(1, 2)
      Complex.new(1.0, 2.0)
      iex> Complex.new(:nan)
      Complex.new(:nan, 0.0)
  """
  @spec new(part, part) :: t
  def new(re, im \\ 0), do: %__MODULE__{re: part!(re), im: part!(im)}

  defp part!(x) when is_integer(x), do: x * 1.0
  defp part!(x) when is_float(x) or x in @non_finite, do: x

  defp part!(x) do
    raise ArgumentError,
          "the parts of a complex number must be numbers, :nan, :infinity or :neg_infinity, " <>
            "got: #{inspect(x)}"
  end

  @doc "The real part."
  @spec real(t) :: part
  def real(%__MODULE__{re: re}), do: re

  @doc "The imaginary part."
  @spec imag(t) :: part
  def imag(%__MODULE__{im: im}), do: im

  @doc """
  The phase (argument) of a complex number or a real one, in radians: `atan2(im, re)`, in
  `(-pi, pi]`, with the values the `complex` package (0.5) gives for non-finite parts. A real
  number's phase is the integer `0` (or `pi` below zero).

  ## Examples

      iex> Complex.phase(Complex.new(0, 1))
      1.5707963267948966
      iex> Complex.phase(Complex.new(:infinity, 3))
      0
      iex> Complex.phase(Complex.new(:neg_infinity, :infinity))
      2.356194490192345
      iex> Complex.phase(-2)
      3.141592653589793
  """
  @spec phase(t | part) :: number | :nan
  def phase(:nan), do: :nan
  def phase(:infinity), do: 0
  def phase(:neg_infinity), do: :math.pi()
  def phase(x) when is_number(x) and x < 0, do: :math.pi()
  def phase(x) when is_number(x), do: 0

  # an infinite real part and a finite imaginary one: the direction of the real axis
  def phase(%__MODULE__{re: :infinity, im: im}) when is_number(im), do: 0
  def phase(%__MODULE__{re: :neg_infinity, im: im}) when is_number(im), do: :math.pi()

  # both infinite: the diagonals (the complex package answers 5pi/4 for -Inf-Infi)
  def phase(%__MODULE__{re: :infinity, im: :infinity}), do: :math.pi() / 4
  def phase(%__MODULE__{re: :infinity, im: :neg_infinity}), do: -:math.pi() / 4
  def phase(%__MODULE__{re: :neg_infinity, im: :infinity}), do: 3 * :math.pi() / 4
  def phase(%__MODULE__{re: :neg_infinity, im: :neg_infinity}), do: 5 * :math.pi() / 4

  # an infinite imaginary part and a finite or NaN real one: the direction of the imaginary
  # axis (the complex package decides on the imaginary part first here)
  def phase(%__MODULE__{re: re, im: :infinity}) when re not in [:infinity, :neg_infinity],
    do: :math.pi() / 2

  def phase(%__MODULE__{re: re, im: :neg_infinity}) when re not in [:infinity, :neg_infinity],
    do: -:math.pi() / 2

  def phase(%__MODULE__{re: re, im: im}) when is_number(re) and is_number(im),
    do: :math.atan2(im, re)

  # a NaN part
  def phase(%__MODULE__{}), do: :nan

  @doc """
  The number as Nx prints a complex element: `re+imi` or `re-imi`, each part formatted by
  `format_part` (by default as an f64 float; non-finite parts as `NaN`, `Inf`, `-Inf`).

  ## Examples

      iex> Complex.to_string(Complex.new(0.5, :neg_infinity))
      "0.5-Infi"
  """
  @spec to_string(t, (part -> String.t())) :: String.t()
  def to_string(%__MODULE__{re: re, im: im}, format_part \\ &format_part/1) do
    im_string = format_part.(im)

    sign =
      case im_string do
        "-" <> _ -> ""
        _ -> "+"
      end

    format_part.(re) <> sign <> im_string <> "i"
  end

  defp format_part(:nan), do: "NaN"
  defp format_part(:infinity), do: "Inf"
  defp format_part(:neg_infinity), do: "-Inf"
  defp format_part(x) when is_float(x), do: Float.to_string(x)

  defimpl Inspect do
    def inspect(z, _opts), do: Complex.to_string(z)
  end
end
