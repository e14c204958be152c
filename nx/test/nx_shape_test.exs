defmodule Nx.ShapeTest do
  use ExUnit.Case, async: true
  doctest Nx.Shape

  test "binary_broadcast aligns on the right" do
    assert Nx.Shape.binary_broadcast({}, {2, 3}) == {2, 3}
    assert Nx.Shape.binary_broadcast({2, 1, 4}, {3, 1}) == {2, 3, 4}
    assert Nx.Shape.binary_broadcast({0}, {1}) == {0}

    assert_raise ArgumentError, "cannot broadcast tensor of dimensions {2} to {3}", fn ->
      Nx.Shape.binary_broadcast({2}, {3})
    end
  end

  test "normalize_axis errors name the axis and rank" do
    assert Nx.Shape.normalize_axis({2, 3}, -2) == 0

    assert_raise ArgumentError, "given axis (-3) invalid for shape with rank 2", fn ->
      Nx.Shape.normalize_axis({2, 3}, -3)
    end
  end

  test "reduce sorts axes and keeps them when asked" do
    assert Nx.Shape.reduce({2, 3, 4}, [2, 0], false) == {{3}, [0, 2]}
    assert Nx.Shape.reduce({2, 3, 4}, [-1], true) == {{2, 3, 1}, [2]}
    assert Nx.Shape.reduce({2, 3}, nil, true) == {{1, 1}, nil}
    assert Nx.Shape.reduce({2, 3}, [], false) == {{2, 3}, []}
  end

  test "transpose validates the permutation" do
    assert Nx.Shape.transpose({2, 3}, [1, 0]) == {3, 2}
    assert_raise ArgumentError, ~r/must be unique/, fn -> Nx.Shape.transpose({2, 3}, [0, 0]) end
  end

  test "reshape with :auto" do
    assert Nx.Shape.reshape({2, 3, 4}, {:auto}) == {24}
    assert Nx.Shape.reshape({2, 3, 4}, {4, :auto, 2}) == {4, 3, 2}
    assert_raise ArgumentError, ~r/not compatible/, fn -> Nx.Shape.reshape({5}, {2, :auto}) end

    assert_raise ArgumentError, ~r/only one dimension/, fn ->
      Nx.Shape.reshape({4}, {:auto, :auto})
    end
  end

  test "broadcast checks each axis" do
    assert Nx.Shape.broadcast({}, {2, 3}, []) == {2, 3}
    assert Nx.Shape.broadcast({1, 3}, {2, 3}, [0, 1]) == {2, 3}

    assert_raise ArgumentError, ~r/with axes \[1, 0\]/, fn ->
      Nx.Shape.broadcast({2, 3}, {2, 3}, [1, 0])
    end
  end

  test "slice clamps starts and validates lengths and strides" do
    assert Nx.Shape.slice({4, 4}, [-1, 3], [2, 2], [1, 1]) == {[0, 2], {2, 2}}
    assert Nx.Shape.slice({7}, [0], [7], [3]) == {[0], {3}}
    assert_raise ArgumentError, ~r/invalid stride/, fn -> Nx.Shape.slice({3}, [0], [1], [0]) end

    assert_raise ArgumentError, ~r/same length as the rank/, fn ->
      Nx.Shape.slice({3}, [0, 0], [1], [1])
    end
  end

  test "concatenate checks ranks and other dimensions" do
    assert Nx.Shape.concatenate([{2, 3}, {2, 1}, {2, 2}], 1) == {2, 6}

    # Nx 0.7.2's message (the concatenated axis as *)
    assert_raise ArgumentError,
                 "expected all shapes to match {*}, got unmatching shape: {2, 1}",
                 fn -> Nx.Shape.concatenate([{2}, {2, 1}], 0) end
  end

  test "dot with several contraction and batch axes" do
    assert Nx.Shape.dot({2, 3, 4}, [1, 2], [], {3, 4, 5}, [0, 1], []) == {2, 5}
    assert Nx.Shape.dot({3}, [0], [], {3}, [0], []) == {}
    assert Nx.Shape.dot({2}, [], [], {3}, [], []) == {2, 3}

    # Nx 0.7.2's message (without a space before "and")
    assert_raise ArgumentError,
                 "dot batch dimension sizes must match, but the left batch dimension of " <>
                   "axes [0] has dimension sizes [2]and the right batch dimension of axes " <>
                   "[0] has sizes [4]",
                 fn ->
                   Nx.Shape.dot({2, 3}, [1], [0], {4, 3}, [1], [0])
                 end
  end

  # Nx 0.7.2's rules and messages for batch axes (its dot/6 doc examples)
  test "dot's batch axes: both sides or neither, leading, not contracted" do
    {u, v} = {{2, 3, 4}, {2, 4, 3}}

    for {args, message} <- [
          {{[2], [0], [1], []}, "right tensor must be batched if left tensor is batched"},
          {{[2], [], [1], [0]}, "left tensor must be batched if right tensor is batched"},
          {{[2], [1], [1], [0]},
           "invalid dot batch axis for the left tensor, batch axes must be successive " <>
             "dimensions starting from 0, got [1]"},
          {{[2], [0], [1], [1]},
           "invalid dot batch axis for the right tensor, batch axes must be successive " <>
             "dimensions starting from 0, got [1]"},
          {{[2], [0], [1], [0, 1]},
           "invalid dot batch axis for the right tensor, batch axes must be successive " <>
             "dimensions starting from 0, got [0, 1]"},
          {{[0], [0], [1], [0]},
           "dot batch axes for left tensor ([0]) cannot be in contract axes ([0])"},
          {{[2], [0], [0], [0]},
           "dot batch axes for right tensor ([0]) cannot be in contract axes ([0])"}
        ] do
      {c1, b1, c2, b2} = args
      assert_raise ArgumentError, message, fn -> Nx.Shape.dot(u, c1, b1, v, c2, b2) end
    end

    assert Nx.Shape.dot(u, [2], [0], v, [1], [0]) == {2, 3, 3}
  end

  test "squeeze and new_axis" do
    assert Nx.Shape.squeeze({1, 1}, [0, 1]) == {}
    assert Nx.Shape.new_axis({}, 0) == {1}
    assert Nx.Shape.new_axis({2}, 1) == {2, 1}

    assert_raise ArgumentError,
                 "new axis position for shape {2} must be a number between -2 and 1, got: 3",
                 fn -> Nx.Shape.new_axis({2}, 3) end
  end
end
