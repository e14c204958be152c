[
  inputs: ["{mix,.formatter}.exs", "{lib,test_elixir,test_real_nx,examples,bench}/**/*.{ex,exs}"],
  subdirectories: ["nx"],
  locals_without_parens: [defn: 2, defnp: 2]
]
