"""What ``jax.checkpoint`` saves on this machine's backend, measured: a chain of tanh layers
(``x <- tanh(x @ w_i)``), the gradient of ``sum(chain(x))`` with respect to every ``w_i``.

For each variant, in a fresh subprocess of its own (so that peak RSS is that variant's alone):

* XLA's own figures for the compiled gradient (``memory_analysis()``: temp, arguments, output);
* the peak RSS of the process after compiling (``ru_maxrss``) and after one gradient step;
* what the optimised HLO holds (``compiled.as_text()``): the tanh it computes (forward and
  recomputed), the optimisation barriers JAX's ``prevent_cse`` adds, and the while loops;
* the tanh of the HLO JAX hands to XLA (``lowered.as_text()``), before any XLA pass.

Then (``--passes``) the HLO passes XLA runs on a small chain (``XLA_FLAGS=--xla_dump_to``), to
say whether this backend has a rematerialization pass and which CSE passes may merge a
recomputation back into the forward pass.

    .venv/bin/python bench/checkpoint_memory.py                 # 64 layers, batch 4096, width 512
    .venv/bin/python bench/checkpoint_memory.py --layers 16 --batch 512 --width 128 --json out.json
    .venv/bin/python bench/checkpoint_memory.py --variants plain,real_nx_unrolled_checkpoint

The ``real_nx_*`` variants (named with ``--variants`` only) compile the graph real Nx 0.7.2
gives nx_jax's compiler (bench/checkpoint_graph_real_nx.exs, run with ``mix``; ``NX_JAX_NX``,
default ``_build/real-nx-src``, names the real Nx build).

Prints a markdown table (the one docs/BENCHMARKS.md quotes) and, with ``--json``, writes the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

MIB = 1024 * 1024

# variant -> what it is (the table's first column)
VARIANTS: dict[str, str] = {
    "plain": "plain (every activation saved)",
    "remat": "`jax.checkpoint(nothing_saveable)` every 8 layers, unrolled",
    "remat_no_cse_guard": "the same, `prevent_cse=False`",
    "remat_dots": "the same, `policy=dots_saveable`",
    "scan": "`lax.scan` over groups of 8 layers, no checkpoint",
    "scan_remat": "`lax.scan` over groups of 8, body `jax.checkpoint(nothing_saveable)`",
    "scan_remat_no_cse_guard": "the same, `prevent_cse=False` (as JAX advises inside scan)",
    "scan_index_remat": "`lax.scan` over the group index, the weights closed over and read by "
                        "index, body `jax.checkpoint(nothing_saveable, prevent_cse=False)`",
    "remat_each_layer": "`jax.checkpoint` on every layer, unrolled",
    "remat_tied": "every 8 layers, unrolled, the recomputation tied to the cotangent "
                  "(`custom_vjp` + `optimization_barrier`, not `jax.checkpoint`)",
    "nx_jax_while": "nx_jax: `while {x}, i <- 0..n-1` over the groups (py_backend's lowering)",
    "nx_jax_while_checkpoint": "nx_jax: the same, the group in `checkpoint/3` "
                               "(`:nothing_saveable`, `prevent_cse: false`)",
    "nx_jax_while_checkpoint_native": "nx_jax: the same in numerics mode `native` "
                                      "(`config :nx_jax, numerics: :native`)",
    "real_nx_unrolled_checkpoint": "real Nx 0.7.2: the chain unrolled, each group of 8 in "
                                   "`checkpoint/3` (real Nx's own gradient)",
    "real_nx_unrolled_checkpoint_native": "real Nx 0.7.2: the same in numerics mode `native`",
    "real_nx_while_checkpoint": "real Nx 0.7.2: `while` over the groups (the weights in its "
                                "state, read by index), the group in `checkpoint/3` (real Nx's "
                                "own gradient of the loop)",
    "real_nx_while_checkpoint_native": "real Nx 0.7.2: the same in numerics mode `native`",
}


def _group(x: Any, ws: Any) -> Any:
    import jax.numpy as jnp

    for i in range(ws.shape[0]):
        x = jnp.tanh(x @ ws[i])
    return x


def loss_function(variant: str, group: int) -> Callable[[Any, Any], Any]:
    """``loss(ws, x)``: ``ws`` of shape (layers, width, width)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    policies = jax.checkpoint_policies

    def chain_unrolled(ws: Any, x: Any, wrap: Callable[[Any], Any], size: int) -> Any:
        step = wrap(_group)
        for start in range(0, ws.shape[0], size):
            x = step(x, ws[start : start + size])
        return x

    def chain_scan(ws: Any, x: Any, wrap: Callable[[Any], Any]) -> Any:
        groups = ws.reshape(ws.shape[0] // group, group, *ws.shape[1:])
        body = wrap(_group)
        x, _ = lax.scan(lambda carry, w: (body(carry, w), None), x, groups)
        return x

    def identity(f: Any) -> Any:
        return f

    def tied(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        # a recomputation that cannot start before the cotangent reaching it exists: what
        # jax.checkpoint leaves to the scheduler, forced by a data dependency
        g = jax.custom_vjp(f)

        def forward(x: Any, ws: Any) -> tuple[Any, Any]:
            return f(x, ws), (x, ws)

        def backward(saved: Any, cotangent: Any) -> Any:
            x, ws, cotangent = lax.optimization_barrier((*saved, cotangent))
            return jax.vjp(f, x, ws)[1](cotangent)

        g.defvjp(forward, backward)
        return g

    def chain_by_index(ws: Any, x: Any, wrap: Callable[[Any], Any]) -> Any:
        def group_at(x: Any, i: Any, ws: Any) -> Any:
            for j in range(group):
                x = jnp.tanh(x @ lax.dynamic_index_in_dim(ws, i * group + j, keepdims=False))
            return x

        body = wrap(group_at)
        x, _ = lax.scan(lambda carry, i: (body(carry, i, ws), None), x,
                        jnp.arange(ws.shape[0] // group))
        return x

    def remat(policy: Any, prevent_cse: bool = True) -> Callable[[Any], Any]:
        return lambda f: jax.checkpoint(f, policy=policy, prevent_cse=prevent_cse)

    chains: dict[str, Callable[[Any, Any], Any]] = {
        "plain": lambda ws, x: chain_unrolled(ws, x, identity, group),
        "remat": lambda ws, x: chain_unrolled(ws, x, remat(policies.nothing_saveable), group),
        "remat_no_cse_guard": lambda ws, x: chain_unrolled(
            ws, x, remat(policies.nothing_saveable, False), group),
        "remat_dots": lambda ws, x: chain_unrolled(ws, x, remat(policies.dots_saveable), group),
        "scan": lambda ws, x: chain_scan(ws, x, identity),
        "scan_remat": lambda ws, x: chain_scan(ws, x, remat(policies.nothing_saveable)),
        "scan_remat_no_cse_guard": lambda ws, x: chain_scan(
            ws, x, remat(policies.nothing_saveable, False)),
        "scan_index_remat": lambda ws, x: chain_by_index(
            ws, x, remat(policies.nothing_saveable, False)),
        "remat_each_layer": lambda ws, x: chain_unrolled(
            ws, x, remat(policies.nothing_saveable), 1),
        "remat_tied": lambda ws, x: chain_unrolled(ws, x, tied, group),
    }
    chain = chains[variant]
    return lambda ws, x: jnp.sum(chain(ws, x))


def nx_jax_loss(variant: str, layers: int, batch: int, width: int,
                group: int) -> Callable[[Any, Any], Any]:
    """``loss(ws, x)`` as nx_jax runs it: the wire graph of ``sum(x)`` after a ``while`` over
    a range (``:range_loop``, the weights captured and sliced by the index), the group of
    layers inside ``checkpoint/3`` or not, its gradient with respect to the weights; built
    node by node as Nx.Defn.WireEncoder writes it and lowered by py_backend."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from py_backend.channel import atom
    from py_backend.program import decode_graph, lower
    from tests.helpers import GraphBuilder, elixir_term, out_term

    f32, s64 = "f32", "s64"
    xs, ws_out, w_out = (f32, (batch, width)), (f32, (layers, width, width)), (f32, (width, width))

    def with_subgraph(g: GraphBuilder, op: str, inputs: list[int], out: Any, key: str,
                      sub: GraphBuilder, outputs: list[int], **opts: Any) -> int:
        node = len(g.nodes)
        raw = {atom(k): elixir_term(v) for k, v in opts.items()}
        raw[atom(key)] = sub.term(outputs)
        g.nodes.append((node, atom(op), elixir_term(inputs), raw, out_term(out)))
        g.outs.append(out)
        return node

    def layers_of(s: GraphBuilder, x: int, i: int, ws: int) -> int:
        zero, first = s.const(0, s64), s.op("multiply", i, s.const(group, s64))
        for j in range(group):
            k = s.op("add", first, s.const(j, s64))
            w = s.add("dynamic_slice", [ws, k, zero, zero], {"lengths": [1, width, width]},
                      (f32, (1, width, width)))
            h = s.add("dot", [x, s.add("reshape", [w], {}, w_out)],
                      {"contract_axes": [[1], [0]], "batch_axes": [[], []]}, xs)
            x = s.add("tanh", [h], {}, xs)
        return x

    body = GraphBuilder()
    x, i, ws = body.param(0, *xs), body.param(1, s64), body.param(2, *ws_out)
    if variant.startswith("nx_jax_while_checkpoint"):
        fun = GraphBuilder()
        out = layers_of(fun, fun.param(0, *xs), fun.param(1, s64), fun.param(2, *ws_out))
        node = with_subgraph(body, "checkpoint", [x, i, ws], [xs], "fun", fun, [out],
                             policy="nothing_saveable", prevent_cse=False)
        result = body.add("elem", [node], {"index": 0}, xs)
    else:
        result = layers_of(body, x, i, ws)

    g = GraphBuilder()
    ws, x = g.param(0, *ws_out), g.param(1, *xs)
    loop = with_subgraph(g, "range_loop", [x, ws], [xs], "body", body, [result], first=0,
                         step=1, count=layers // group)
    y = g.add("elem", [loop], {"index": 0}, xs)
    loss = g.add("sum", [y], {"axes": None, "keep_axes": False}, (f32, ()))
    grads = g.add("grad", [loss, ws], {}, [ws_out])
    run = lower(decode_graph(g.binary([g.add("elem", [grads], {"index": 0}, ws_out)])))
    return lambda ws, x: run(ws, x)[0]


def real_nx_graph(variant: str, layers: int, batch: int, width: int,
                  group: int) -> tuple[bytes, list[int]]:
    """The wire graph NxJax's compiler sends under real Nx 0.7.2 for ``variant`` (``unrolled``,
    ``while``, either with ``_checkpoint``), as bench/checkpoint_graph_real_nx.exs writes it
    (``NX_JAX_NX``, default ``_build/real-nx-src``, names the real Nx build), and the
    arguments its parameters are (0: ``ws``, 1: ``x``)."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    env = dict(os.environ, NX_JAX_NX=os.environ.get("NX_JAX_NX", "_build/real-nx-src"))
    env.pop("MIX_ENV", None)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "graph.etf")
        cmd = ["mix", "run", "--no-start", "bench/checkpoint_graph_real_nx.exs", variant,
               str(layers), str(batch), str(width), str(group), out]
        printed = subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True,
                                 text=True).stdout
        with open(out, "rb") as f:
            graph = f.read()
    line = next(line for line in printed.splitlines() if line.startswith("parameters: "))
    return graph, [int(i) for i in line.removeprefix("parameters: ").split(",")]


def real_nx_loss(variant: str, layers: int, batch: int, width: int,
                 group: int) -> tuple[Callable[[Any, Any], Any], bool]:
    """``loss(ws, x)`` as nx_jax runs it under real Nx (real Nx's gradient, written in Elixir,
    lowered by py_backend), and whether the graph is byte for byte the one of the same chain
    without ``checkpoint/3``."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from py_backend.program import decode_graph, lower

    chain = variant.removeprefix("real_nx_").removesuffix("_native")
    graph, parameters = real_nx_graph(chain, layers, batch, width, group)
    plain, _ = real_nx_graph(chain.removesuffix("_checkpoint"), layers, batch, width, group)
    run = lower(decode_graph(graph))
    return (lambda ws, x: run(*[(ws, x)[i] for i in parameters])[0]), graph == plain


def _count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


def measure(variant: str, layers: int, batch: int, width: int, group: int) -> dict[str, Any]:
    """The figures of one variant, in this process (run it in a fresh one)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    ws = jnp.asarray(rng.normal(size=(layers, width, width)).astype(np.float32)
                     / np.sqrt(width))
    x = jnp.asarray(rng.normal(size=(batch, width)).astype(np.float32))
    same_as_plain = None
    if variant.startswith(("nx_jax", "real_nx")):
        # (the worker's numerics mode: nx, its default, computes f32 tanh in f64)
        os.environ["NX_JAX_NUMERICS"] = "native" if variant.endswith("_native") else "nx"
        if variant.startswith("real_nx"):
            loss, same_as_plain = real_nx_loss(variant, layers, batch, width, group)
            grad = jax.jit(loss)
        else:
            grad = jax.jit(nx_jax_loss(variant, layers, batch, width, group))
    else:
        grad = jax.jit(jax.grad(loss_function(variant, group)))
    lowered = grad.lower(ws, x)
    started = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - started
    memory = compiled.memory_analysis()
    before = lowered.as_text()
    after = compiled.as_text()
    # (None only on backends that keep no such figures or text)
    assert memory is not None and after is not None, "this backend gives no memory analysis"
    rss_compiled = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.perf_counter()
    g = compiled(ws, x)
    g.block_until_ready()
    step_s = time.perf_counter() - started
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "variant": variant,
        "temp_mib": memory.temp_size_in_bytes / MIB,
        "argument_mib": memory.argument_size_in_bytes / MIB,
        "output_mib": memory.output_size_in_bytes / MIB,
        "rss_compiled_mib": rss_compiled / MIB,
        "rss_peak_mib": rss_peak / MIB,
        "compile_s": compile_s,
        "step_s": step_s,
        # StableHLO handed to XLA: every tanh JAX asked for (forward and recomputed)
        "tanh_lowered": _count(r"stablehlo\.tanh", before),
        "opt_barriers_lowered": _count(r"stablehlo\.optimization_barrier", before),
        # optimised HLO: what XLA kept
        "tanh_compiled": _count(r"\btanh\(", after),
        "opt_barriers_compiled": _count(r"\bopt-barrier\(", after),
        "while_loops_compiled": _count(r"\bwhile\(", after),
        "grad_checksum": float(jnp.sum(g)),
        # real Nx: whether checkpoint/3 left the graph as it is without it
        "same_graph_as_without_checkpoint": same_as_plain,
    }


def schedule(hlo: str) -> str:
    """The order in which the entry computation of optimised HLO ``hlo`` runs its kernels:
    ``T`` one that computes a tanh, ``D`` a dot, ``.`` any other fusion (parameters, copies,
    slices and the like are left out)."""
    computations: dict[str, list[str]] = {}
    current = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head:
            current = head.group(1)
            computations[current] = []
        elif current is not None:
            computations[current].append(line)
    def kind(body: list[str]) -> str:
        return ("T" if any(" tanh(" in b for b in body)
                else "D" if any(" dot(" in b or " custom-call(" in b for b in body) else ".")

    entry = next(m.group(1) for m in re.finditer(r"^ENTRY %?([\w.\-]+)", hlo, re.M))
    marks = []
    for line in computations[entry]:
        called = re.search(r"calls=%?([\w.\-]+)", line)
        if called and called.group(1) in computations:
            marks.append(kind(computations[called.group(1)]))
        elif " dot(" in line or " custom-call(" in line or " tanh(" in line:
            marks.append(kind([line]))
    return "".join(marks)


def passes(layers: int = 4, batch: int = 8, width: int = 8) -> dict[str, Any]:
    """The HLO passes that changed a small checkpointed gradient on this backend, in order
    (``--xla_dump_hlo_pass_re``: XLA dumps the module after each pass that changes it)."""
    with tempfile.TemporaryDirectory() as dump:
        env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.*")
        code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
                f"import checkpoint_memory as m; m.measure('remat', {layers}, {batch}, "
                f"{width}, 2)")
        subprocess.run([sys.executable, "-c", code], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        names = sorted(n for n in os.listdir(dump) if "jit__lambda" in n)
    changed = []
    for name in names:
        # module_NNNN.jit__lambda.NNNN.<pipeline>.after_<pass>.before_<next pass>.txt
        m = re.match(r".*\.\d{4}\.([\w\-]+)\.after_([\w\-]+)\.", name)
        if m and m.group(2) != "pipeline-start":
            changed.append(f"{m.group(1)}/{m.group(2)}")
    return {"changed_by": changed,
            "rematerialization_passes": [p for p in changed if "remat" in p.lower()]}


def schedules(batch: int, width: int, layers: int = 16, group: int = 8) -> dict[str, str]:
    """``schedule`` of the compiled gradient of a shorter chain, plain and checkpointed."""
    import jax
    import jax.numpy as jnp

    ws = jax.ShapeDtypeStruct((layers, width, width), jnp.float32)
    x = jax.ShapeDtypeStruct((batch, width), jnp.float32)
    texts = {v: jax.jit(jax.grad(loss_function(v, group))).lower(ws, x).compile().as_text()
             for v in ("plain", "remat", "remat_tied")}
    return {v: schedule(text or "") for v, text in texts.items()}


def child(args: argparse.Namespace) -> None:
    print(json.dumps(measure(args.child, args.layers, args.batch, args.width, args.group)))


def run_variant(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", variant, "--layers", str(args.layers),
           "--batch", str(args.batch), "--width", str(args.width), "--group", str(args.group)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| variant | XLA temp (MiB) | peak RSS (MiB) | RSS after compile (MiB) | tanh asked "
        "(lowered) | tanh kept (compiled) | opt-barriers kept | while loops | step (s) | "
        "sum of the gradient |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {VARIANTS[r['variant']]} | {r['temp_mib']:.0f} | {r['rss_peak_mib']:.0f} | "
            f"{r['rss_compiled_mib']:.0f} | {r['tanh_lowered']} | {r['tanh_compiled']} | "
            f"{r['opt_barriers_compiled']} | {r['while_loops_compiled']} | {r['step_s']:.2f} | "
            f"{r['grad_checksum']:.6g} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--group", type=int, default=8)
    # (the real_nx_* variants need real Nx built and mix: named on purpose only)
    parser.add_argument("--variants",
                        default=",".join(v for v in VARIANTS if not v.startswith("real_nx")))
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--passes", action="store_true", help="list XLA's passes too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    import jax

    print(f"JAX {jax.__version__}, backend {jax.default_backend()}, "
          f"{args.layers} layers, batch {args.batch}, width {args.width}, "
          f"groups of {args.group}", flush=True)
    rows = []
    for variant in args.variants.split(","):
        rows.append(run_variant(variant, args))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(table(rows))
    result: dict[str, Any] = {"config": vars(args), "jax": jax.__version__,
                              "backend": jax.default_backend(), "rows": rows}
    if args.passes:
        result["xla_passes"] = passes()
        result["schedules"] = schedules(args.batch, args.width)
        print(json.dumps({k: result[k] for k in ("xla_passes", "schedules")}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
