defmodule NxJax.Graph do
  @moduledoc """
  Deprecated: `NxJax.Picture` under its old name (its functions delegate there). "Graph" now
  names only the traced graph itself.
  """

  @doc false
  @deprecated "Use NxJax.Picture.to_dot/2 instead"
  defdelegate to_dot(outputs, opts \\ []), to: NxJax.Picture

  @doc false
  @deprecated "Use NxJax.Picture.render/3 instead"
  defdelegate render(outputs, path, opts \\ []), to: NxJax.Picture
end
