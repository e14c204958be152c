[
  inputs: ["{mix,.formatter}.exs", "{lib,test_elixir,test_real_nx,examples,bench}/**/*.{ex,exs}"],
  subdirectories: ["nx"],
  # the forms of Nx.Defn without parentheses, as the Nx we are built against exports them
  import_deps: [:nx]
]
