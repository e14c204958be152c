defmodule NxJax.DoctorTest do
  # mix nx_jax.doctor: what it finds on this machine, and the problems it names with a fix
  use ExUnit.Case, async: true

  defp find(checks, label), do: Enum.find(checks, &(elem(&1, 1) == label))

  test "this project's Python, JAX, worker and settings: no problem" do
    checks = NxJax.Doctor.report(pings: 20)
    assert Enum.filter(checks, &(elem(&1, 0) == :problem)) == []
    assert {:ok, "jax", "0.10." <> _, nil} = find(checks, "jax")
    assert {:ok, "x64", "true", nil} = find(checks, "x64")
    assert {:ok, "protocol", "1", nil} = find(checks, "protocol")
    digest = NxJax.Worker.Sources.digest()
    assert {:ok, "worker sources", detail, nil} = find(checks, "worker sources")
    assert detail =~ digest
    assert {:ok, _, "p50 " <> _, nil} = find(checks, "round trip (ping)")
    assert {:info, "timeout", timeout, nil} = find(checks, "timeout")
    assert timeout =~ "60000 (default"
    text = NxJax.Doctor.format(checks)
    assert text =~ ~r/^ok +python +\S+python/m
  end

  test "a Python that does not exist is a problem with its fix" do
    checks = NxJax.Doctor.report(python: "/nonexistent/bin/python")
    assert {:problem, "python", detail, fix} = find(checks, "python")
    assert detail == "/nonexistent/bin/python (from --python) does not exist"
    assert fix =~ "make deps"
    assert NxJax.Doctor.format(checks) =~ "PROBLEM python"
  end

  test "a worker whose sources differ is a problem naming both digests" do
    checks =
      NxJax.Doctor.report(env: [{"NX_JAX_EXPECT_SOURCES", String.duplicate("f", 32)}], pings: 5)

    assert {:problem, "worker sources", why, fix} = find(checks, "worker sources")
    assert why =~ "digest #{String.duplicate("f", 32)}" and why =~ NxJax.Worker.Sources.digest()
    assert fix =~ "mix compile --force"
  end
end
