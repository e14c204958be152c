# The forms of Nx.Defn written without parentheses, as Nx 0.7.2 exports them: a project with
# `import_deps: [:nx]` in its own .formatter.exs keeps `defn f(x), do: x` and
# `while {x}, i < 3 do ... end` as written.
defn_forms = [
  defn: 2,
  defnp: 2,
  deftransform: 1,
  deftransform: 2,
  deftransformp: 1,
  deftransformp: 2,
  while: 3
]

[
  inputs: ["{mix,.formatter}.exs", "{lib,test,nx_suite}/**/*.{ex,exs}"],
  locals_without_parens: defn_forms,
  export: [locals_without_parens: defn_forms]
]
