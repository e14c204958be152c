[
  inputs: ["{mix,.formatter}.exs", "{lib,test,nx_suite}/**/*.{ex,exs}"],
  locals_without_parens: [defn: 2, defnp: 2]
]
