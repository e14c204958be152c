defmodule NxJax.Defn do
  @moduledoc """
  Deprecated: `NxJax.Autodiff` under its old name, one letter from `Nx.Defn`. Each function
  here calls the one of the same name and arity in `NxJax.Autodiff` (under either front end),
  so code that imports `NxJax.Defn` keeps running while it moves to `import NxJax.Autodiff`.
  """

  # transforms, so that real Nx's defn may call them too (it calls no plain function)
  import Nx.Defn, only: [deftransform: 2]

  @doc false
  @deprecated "Use NxJax.Autodiff.jvp/3 instead"
  deftransform jvp(fun, primals, tangents) do
    NxJax.Autodiff.jvp(fun, primals, tangents)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.vjp/2 instead"
  deftransform vjp(fun, primals) do
    NxJax.Autodiff.vjp(fun, primals)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.linearize/2 instead"
  deftransform linearize(fun, primals) do
    NxJax.Autodiff.linearize(fun, primals)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.jacfwd/2 instead"
  deftransform jacfwd(fun, x) do
    NxJax.Autodiff.jacfwd(fun, x)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.jacrev/2 instead"
  deftransform jacrev(fun, x) do
    NxJax.Autodiff.jacrev(fun, x)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.hessian/2 instead"
  deftransform hessian(fun, x) do
    NxJax.Autodiff.hessian(fun, x)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.custom_jvp/3 instead"
  deftransform custom_jvp(expr_or_fun, inputs, jvp_fun) do
    NxJax.Autodiff.custom_jvp(expr_or_fun, inputs, jvp_fun)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.custom_root/4 instead"
  deftransform custom_root(f, initial_guess, solve, tangent_solve) do
    NxJax.Autodiff.custom_root(f, initial_guess, solve, tangent_solve)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.custom_linear_solve/5 instead"
  deftransform custom_linear_solve(matvec, b, solve, transpose_solve, opts \\ []) do
    NxJax.Autodiff.custom_linear_solve(matvec, b, solve, transpose_solve, opts)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.checkpoint/3 instead"
  deftransform checkpoint(fun, args, opts \\ []) do
    NxJax.Autodiff.checkpoint(fun, args, opts)
  end

  @doc false
  @deprecated "Use NxJax.Autodiff.checkpoint_name/2 instead"
  deftransform checkpoint_name(tensor, name) do
    NxJax.Autodiff.checkpoint_name(tensor, name)
  end
end
