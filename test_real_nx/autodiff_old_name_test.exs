# NxJax.Defn (the toolbox's old name) under real Nx: the clean room's test file, unchanged
Code.require_file("../test_elixir/autodiff_old_name_test.exs", __DIR__)
