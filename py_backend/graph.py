"""Decode and validate an nx_jax graph (PROTOCOL.md section 4) into plain dataclasses.

Nothing here calls JAX. Every rule of the protocol is checked before anything is lowered; a
violation raises :class:`GraphError` naming the node id and op. Which ops exist, their arity,
options and checks, come from the op registry (:mod:`py_backend.ops`); the option kinds and the
checks themselves are defined here.

    >>> from py_backend.channel import atom, encode
    >>> f32 = (atom("f"), 32)
    >>> term = (atom("nx_jax_graph"), 1,
    ...         [(0, atom("parameter"), [], {atom("index"): 0}, (f32, ())),
    ...          (1, atom("exp"), [0], {}, (f32, ()))], [1])
    >>> g = decode_graph(encode(term))
    >>> g.nodes[1].op, g.nodes[1].inputs, g.outputs
    ('exp', (0,), (1,))
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from py_backend import channel
from py_backend.nxtypes import SUPPORTED, NxType, to_dtype, wire_dtype

if TYPE_CHECKING:
    from py_backend.ops import Op

PROTOCOL_VERSION = 1
DEFAULT_MAX_ELEMENTS = 1 << 31


class GraphError(ValueError):
    """The graph breaks a rule of PROTOCOL.md section 4."""


@dataclass(frozen=True)
class TensorOut:
    type: NxType
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """The bytes of a tensor of this type and shape on the wire."""
        return wire_dtype(self.type).itemsize * math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.type}{list(self.shape)}"


@dataclass(frozen=True)
class TupleOut:
    elements: tuple[Out, ...]


Out = TensorOut | TupleOut


@dataclass(frozen=True)
class Node:
    id: int
    op: str
    inputs: tuple[int, ...]
    opts: Mapping[str, Any]
    out: Out

    @property
    def tensor(self) -> TensorOut:
        """The declared tensor output (only for tensor-valued nodes)."""
        assert isinstance(self.out, TensorOut), f"node {self.id} ({self.op}) is tuple-valued"
        return self.out

    def opt_refs(self) -> tuple[int, ...]:
        """Node ids held in opts (``custom_grad``'s wrt, cotangents and grads)."""
        if self.op != "custom_grad":
            return ()
        return (*self.opts["wrt"], *self.opts["cotangents"], *self.opts["grads"])

    def refs(self) -> tuple[int, ...]:
        """Every node id this node refers to: inputs, then ids held in opts."""
        return self.inputs + self.opt_refs()


@dataclass(frozen=True)
class Graph:
    version: int
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]
    parameters: Mapping[int, TensorOut] = field(default_factory=dict)
    hooks: bool = False  # a :hook node here or in a sub-graph (the worker waits for them)


# --- opts kinds ------------------------------------------------------------------------------
# Each checker takes the normalized value and returns the value to store, or raises ValueError
# with what was expected.


def integer(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise ValueError("an integer")


def non_neg_int(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    raise ValueError("a non-negative integer")


def int_or_nil(v: Any) -> int | None:
    return None if v is None else integer(v)


def int_list(v: Any) -> tuple[int, ...]:
    if isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return v
    raise ValueError("a list of integers")


def int_list_or_nil(v: Any) -> tuple[int, ...] | None:
    return None if v is None else int_list(v)


def boolean(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    raise ValueError("true or false")


def _nx_type_or_none(v: Any) -> NxType | None:
    """``{kind, bits}`` as decoded (an erlang-py atom) or as normalized opts (an _Atom)."""
    if not (isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], int)):
        return None
    kind = v[0].name if isinstance(v[0], _Atom) else channel.atom_name(v[0])
    nx_type = NxType(kind, v[1]) if kind is not None else None
    return nx_type if nx_type in SUPPORTED else None


def nx_type(v: Any) -> NxType:
    """A type decided by the Elixir side (``{:f, 32}``), e.g. the one a comparison's inputs
    are compared in: the worker never re-derives type promotion."""
    found = _nx_type_or_none(v)
    if found is None:
        raise ValueError("a supported Nx type such as {:f, 32}")
    return found


def binary(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    raise ValueError("a binary")


_SPECIAL_NUMBERS = {"nan": math.nan, "infinity": math.inf, "neg_infinity": -math.inf}


def number(v: Any) -> int | float | complex:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return v
    if isinstance(v, _Atom) and v.name in _SPECIAL_NUMBERS:
        return _SPECIAL_NUMBERS[v.name]
    if isinstance(v, dict) and v.get(_Atom("__struct__")) == _Atom("Elixir.Complex"):
        try:
            return complex(real(v[_Atom("re")]), real(v[_Atom("im")]))
        except (KeyError, ValueError):
            pass
    raise ValueError("a number, :nan, :infinity, :neg_infinity or a %Complex{re, im}")


def real(v: Any) -> float:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, _Atom) and v.name in _SPECIAL_NUMBERS:
        return _SPECIAL_NUMBERS[v.name]
    raise ValueError("a real number")


def int_list_pair(v: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if isinstance(v, tuple) and len(v) == 2:
        return (int_list(v[0]), int_list(v[1]))
    raise ValueError("a pair {[int], [int]}")


def atom_list(v: Any) -> tuple[Any, ...]:
    if isinstance(v, tuple):
        return tuple(x.name if isinstance(x, _Atom) else x for x in v)
    raise ValueError("a list")


def int_tuples(width: int) -> Callable[[Any], tuple[tuple[int, ...], ...]]:
    """A list of ``width``-tuples of integers (``[{lo, hi}]``, ``[{lo, hi, interior}]``)."""

    def check(v: Any) -> tuple[tuple[int, ...], ...]:
        if isinstance(v, tuple) and all(
            isinstance(t, tuple) and len(t) == width
            and all(isinstance(x, int) and not isinstance(x, bool) for x in t)
            for t in v
        ):
            return v
        raise ValueError(f"a list of {width}-tuples of integers")

    return check


def choice(*names: str) -> Callable[[Any], str]:
    """One of the given atoms."""

    def check(v: Any) -> str:
        if isinstance(v, _Atom) and v.name in names:
            return v.name
        raise ValueError("one of " + ", ".join(f":{n}" for n in names))

    return check


Kind = Callable[[Any], Any]


@dataclass(frozen=True)
class SubgraphKind:
    """An option holding sub-graphs (PROTOCOL.md 4.3): parsed from the raw term with
    :func:`parse_graph`, one graph (``many=False``) or a non-empty list of them; with
    ``nullable``, ``nil`` (no graph) too."""

    many: bool = False
    nullable: bool = False

    def __call__(self, v: Any) -> Any:  # a Kind; _parse_node calls parse() instead
        raise ValueError("a graph term")

    def parse(self, raw: Any, limit: int) -> Any:
        if self.nullable and raw is None:
            return None
        if not self.many:
            return parse_graph(raw, limit)
        if not (isinstance(raw, list) and raw):
            raise GraphError("must be a non-empty list of graphs")
        return tuple(parse_graph(g, limit) for g in raw)


SUBGRAPH = SubgraphKind()
SUBGRAPHS = SubgraphKind(many=True)
SUBGRAPH_OR_NIL = SubgraphKind(nullable=True)


def text(v: Any) -> str:
    """A non-empty UTF-8 binary (an Elixir string), as a str."""
    if isinstance(v, bytes) and v:
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise ValueError("a non-empty UTF-8 string")


# jax.checkpoint_policies the wire names by atom, and those taking names (checkpoint_name)
CHECKPOINT_POLICIES = ("everything_saveable", "nothing_saveable", "dots_saveable",
                       "dots_with_no_batch_dims_saveable")
NAMED_CHECKPOINT_POLICIES = ("save_only", "save_anything_except")
CheckpointPolicy = str | tuple[str, tuple[str, ...]] | None


def checkpoint_policy(v: Any) -> CheckpointPolicy:
    """``nil``, a policy atom, or ``{:save_only | :save_anything_except, [name]}``."""
    if v is None:
        return None
    if isinstance(v, _Atom) and v.name in CHECKPOINT_POLICIES:
        return v.name
    if (isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], _Atom)
            and v[0].name in NAMED_CHECKPOINT_POLICIES and isinstance(v[1], tuple)):
        try:
            return v[0].name, tuple(text(n) for n in v[1])
        except ValueError:
            pass
    raise ValueError("nil, one of " + ", ".join(f":{p}" for p in CHECKPOINT_POLICIES)
                     + ", or {:save_only | :save_anything_except, [string]}")


def pos_int_or_nil(v: Any) -> int | None:
    if v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0):
        return v
    raise ValueError("a positive integer or nil")

REDUCE_OPTS = {"axes": int_list_or_nil, "keep_axes": boolean}
CONV_OPTS = {
    "strides": int_list,
    "padding": int_tuples(2),
    "input_dilation": int_list,
    "kernel_dilation": int_list,
    "feature_group_size": integer,
    "batch_group_size": integer,
    "input_permutation": int_list,
    "kernel_permutation": int_list,
    "output_permutation": int_list,
}


def int_pairs(v: Any) -> tuple[tuple[int, int], ...]:
    """A list of ``{lo, hi}`` integer pairs (window padding)."""
    if isinstance(v, tuple) and all(
        isinstance(p, tuple) and len(p) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
        for p in v
    ):
        return v
    raise ValueError("a list of {lo, hi} integer pairs")


def tie_break(v: Any) -> str:
    if isinstance(v, _Atom) and v.name in ("low", "high"):
        return v.name
    raise ValueError(":low or :high")


WINDOW_OPTS = {
    "window_dimensions": int_list,
    "strides": int_list,
    "padding": int_pairs,
    "window_dilations": int_list,
}


# --- term normalization ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Atom:
    """An atom inside opts that is not nil/true/false (kept distinct from binaries)."""

    name: str


def normalize(term: Any) -> Any:
    """erlang-py term -> plain Python: atoms -> str (nil -> None, booleans -> bool),
    binaries -> bytes, integer lists (either ETF form) and tuples -> tuples, maps -> dicts."""
    return _unwrap_atoms(_normalize(term))


def _normalize(term: Any) -> Any:
    if term is None or isinstance(term, bool | int | float):
        return term
    if isinstance(term, bytes):  # STRING_EXT: a list of small integers
        return tuple(term)
    data = channel.binary_bytes(term)
    if data is not None:
        return data
    name = channel.atom_name(term)
    if name is not None:
        return _Atom(name)
    if isinstance(term, list | tuple):
        return tuple(_normalize(x) for x in term)
    if isinstance(term, dict):
        return {_normalize(k): _normalize(v) for k, v in term.items()}
    raise ValueError(f"unsupported term {term!r}")


def _unwrap_atoms(term: Any) -> Any:
    if isinstance(term, _Atom):
        return term.name
    if isinstance(term, tuple):
        return tuple(_unwrap_atoms(x) for x in term)
    if isinstance(term, dict):
        return {_unwrap_atoms(k): _unwrap_atoms(v) for k, v in term.items()}
    return term


# --- decoding --------------------------------------------------------------------------------


def max_elements_from_env() -> int:
    raw = os.environ.get("NX_JAX_MAX_ELEMENTS")
    return DEFAULT_MAX_ELEMENTS if raw is None or raw.strip() == "" else int(raw)


def decode_graph(data: bytes | bytearray | memoryview, max_elements: int | None = None) -> Graph:
    """``graph_bin`` (``term_to_binary(graph)``) -> validated :class:`Graph`."""
    try:
        term = channel.decode(data)
    except channel.CodecError as exc:
        raise GraphError(f"graph binary is not an Erlang term: {exc}") from exc
    return parse_graph(term, max_elements)


def parse_graph(term: Any, max_elements: int | None = None) -> Graph:
    """A decoded graph term -> validated :class:`Graph`."""
    # (imported here: the registry refers to this module's kinds and checks)
    from py_backend.ops import REGISTRY as registry

    limit = max_elements_from_env() if max_elements is None else max_elements
    if not (isinstance(term, tuple) and len(term) == 4):
        raise GraphError("graph must be {:nx_jax_graph, version, nodes, outputs}")
    tag, version, raw_nodes, raw_outputs = term
    if channel.atom_name(tag) != "nx_jax_graph":
        raise GraphError(f"graph must start with :nx_jax_graph, got {tag!r}")
    if version != PROTOCOL_VERSION:
        raise GraphError(f"graph version {version!r} is not supported (this worker: 1)")
    if not isinstance(raw_nodes, list):
        raise GraphError("graph nodes must be a list")
    nodes: list[Node] = []
    for position, raw in enumerate(raw_nodes):
        nodes.append(_parse_node(raw, position, nodes, limit, registry))
    outputs = channel.int_list(raw_outputs)
    if not outputs:
        raise GraphError("graph outputs must be a non-empty list of node ids")
    for ref in outputs:
        if not 0 <= ref < len(nodes):
            raise GraphError(f"graph output {ref} is not a node id")
        if not isinstance(nodes[ref].out, TensorOut):
            raise GraphError(f"graph output {ref} ({nodes[ref].op}) is tuple-valued")
    parameters: dict[int, TensorOut] = {}
    for node in nodes:
        if node.op == "parameter":
            index = node.opts["index"]
            seen = parameters.setdefault(index, node.tensor)
            if seen != node.tensor:
                raise GraphError(
                    f"node {node.id} (parameter): index {index} declared as {node.tensor} "
                    f"and as {seen}"
                )
    hooks = any(
        node.op == "hook"
        or any(isinstance(v, Graph) and v.hooks for v in _subgraphs(node))
        for node in nodes
    )
    return Graph(PROTOCOL_VERSION, tuple(nodes), tuple(outputs), parameters, hooks)


def _subgraphs(node: Node) -> list[Any]:
    found: list[Any] = []
    for value in node.opts.values():
        found.extend(value if isinstance(value, tuple) else (value,))
    return found


def _parse_out(term: Any, where: str, limit: int) -> Out:
    if isinstance(term, list):
        if not term:
            raise GraphError(f"{where}: a tuple-valued out must not be empty")
        return TupleOut(tuple(_parse_out(t, where, limit) for t in term))
    if not (isinstance(term, tuple) and len(term) == 2 and isinstance(term[0], tuple)):
        raise GraphError(f"{where}: out must be {{type, shape}} or a list of outs, got {term!r}")
    raw_type, raw_shape = term
    nx_type = _nx_type_or_none(raw_type)
    if nx_type is None:
        raise GraphError(f"{where}: unsupported type {raw_type!r}")
    if not (isinstance(raw_shape, tuple) and all(isinstance(d, int) for d in raw_shape)):
        raise GraphError(f"{where}: shape must be a tuple of integers, got {raw_shape!r}")
    if any(isinstance(d, bool) or d < 0 for d in raw_shape):
        raise GraphError(f"{where}: shape {raw_shape!r} has a negative dimension")
    out = TensorOut(nx_type, tuple(raw_shape))
    if out.size > limit:
        raise GraphError(
            f"{where}: shape {raw_shape!r} has {out.size} elements, more than the limit of "
            f"{limit} (NX_JAX_MAX_ELEMENTS)"
        )
    return out


def _parse_node(
    raw: Any, position: int, nodes: list[Node], limit: int, registry: Mapping[str, Op]
) -> Node:
    if not (isinstance(raw, tuple) and len(raw) == 5):
        raise GraphError(f"node at position {position}: must be {{id, op, inputs, opts, out}}")
    raw_id, raw_op, raw_inputs, raw_opts, raw_out = raw
    if raw_id != position or isinstance(raw_id, bool):
        raise GraphError(f"node at position {position}: id {raw_id!r}, expected {position}")
    op = channel.atom_name(raw_op)
    where = f"node {position} ({op if op is not None else repr(raw_op)})"
    spec = registry.get(op) if op is not None else None
    if op is None or spec is None:
        raise GraphError(f"{where}: unknown op; the worker accepts {sorted(registry)}")
    inputs = channel.int_list(raw_inputs)
    if inputs is None:
        raise GraphError(f"{where}: inputs must be a list of node ids")
    n = len(inputs)
    if n < spec.min_arity or (spec.max_arity is not None and n > spec.max_arity):
        want = (
            f"{spec.min_arity}" if spec.max_arity == spec.min_arity
            else f"at least {spec.min_arity}"
        )
        raise GraphError(f"{where}: takes {want} inputs, got {n}")
    _check_refs(where, position, inputs, "input")
    if not isinstance(raw_opts, dict):
        raise GraphError(f"{where}: opts must be a map")
    try:
        given = _normalize(raw_opts)
    except ValueError as exc:
        raise GraphError(f"{where}: opts: {exc}") from exc
    opts: dict[str, Any] = {}
    for key, kind in spec.opts.items():
        if _Atom(key) not in given:
            if key in spec.defaults:
                opts[key] = spec.defaults[key]
                continue
            raise GraphError(f"{where}: missing option {key}")
        if isinstance(kind, SubgraphKind):
            raw = next(v for k, v in raw_opts.items() if channel.atom_name(k) == key)
            try:
                opts[key] = kind.parse(raw, limit)
            except GraphError as exc:
                raise GraphError(f"{where}: option {key}: {exc}") from exc
            continue
        try:
            opts[key] = kind(given[_Atom(key)])
        except ValueError as exc:
            raise GraphError(
                f"{where}: option {key} must be {exc}, got {_unwrap_atoms(given[_Atom(key)])!r}"
            ) from exc
    out = _parse_out(raw_out, where, limit)
    if _Atom("vectorized") in given or _Atom("vectorized_inputs") in given:
        opts.update(_vectorized_opts(given, op, n, where))
    node = Node(position, op, tuple(inputs), opts, out)
    _check_refs(where, position, node.opt_refs(), "option")
    for ref in inputs if op != "elem" else ():
        if not isinstance(nodes[ref].out, TensorOut):
            raise GraphError(f"{where}: input {ref} ({nodes[ref].op}) is tuple-valued")
    if "vectorized" in opts:
        inner, views = vectorized_views(node, nodes, where)
        spec.check(inner, cast("list[Node]", views), where)
    else:
        spec.check(node, nodes, where)
    return node


# --- vectorized nodes (PROTOCOL.md 4.4) ---------------------------------------------------------
# ``vectorized: k`` with ``vectorized_inputs: [bool]``: the op applies to each entry of the k
# leading axes of the output and of the inputs flagged true (jax.vmap, k times); the other
# inputs are shared by every entry. Ops that evaluate parts of the graph themselves cannot be.

VECTORIZED_OPTS = ("vectorized", "vectorized_inputs")
NOT_VECTORIZABLE = frozenset(
    "parameter constant tensor iota cotangent elem grad custom_grad stop_grad metadata hook "
    "attach_token cond jvp jacfwd jacrev hessian custom_jvp "
    "while range_loop reduce window_reduce checkpoint checkpoint_name custom_root "
    "custom_linear_solve linear_map".split()
)


def _vectorized_opts(given: Mapping[Any, Any], op: str, arity: int, where: str) -> dict[str, Any]:
    if op in NOT_VECTORIZABLE:
        raise GraphError(f"{where}: this op cannot be vectorized (options vectorized, "
                         f"vectorized_inputs)")
    k = given.get(_Atom("vectorized"))
    flags = given.get(_Atom("vectorized_inputs"))
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= 1):
        raise GraphError(f"{where}: option vectorized must be a positive integer, got {k!r}")
    if not (isinstance(flags, tuple) and len(flags) == arity
            and all(isinstance(f, bool) for f in flags) and any(flags)):
        raise GraphError(
            f"{where}: option vectorized_inputs must be a list of {arity} booleans, at least "
            f"one true, got {_unwrap_atoms(flags)!r}"
        )
    return {"vectorized": k, "vectorized_inputs": flags}


def _strip(out: Out, k: int) -> Out:
    if isinstance(out, TupleOut):
        return TupleOut(tuple(_strip(o, k) for o in out.elements))
    return TensorOut(out.type, out.shape[k:])


def _batch(out: Out, k: int) -> tuple[int, ...] | None:
    """The k leading dimensions of out (of every element of a tuple), None if they differ."""
    if isinstance(out, TupleOut):
        batches = {_batch(o, k) for o in out.elements}
        return batches.pop() if len(batches) == 1 else None
    return out.shape[:k] if len(out.shape) >= k else None


class _Views:
    """``nodes`` with some entries replaced (what an entry of a vectorized node sees)."""

    def __init__(self, nodes: Any, replaced: Mapping[int, Node]) -> None:
        self.nodes, self.replaced = nodes, replaced

    def __getitem__(self, ref: int) -> Node:
        return self.replaced.get(ref) or self.nodes[ref]

    def __len__(self) -> int:
        return len(self.nodes)


def inner_node(node: Node) -> Node:
    """A vectorized node as one entry sees it: out without the vectorized axes, and opts
    without the vectorization options."""
    k = node.opts["vectorized"]
    opts = {key: v for key, v in node.opts.items() if key not in VECTORIZED_OPTS}
    return Node(node.id, node.op, node.inputs, opts, _strip(node.out, k))


def vectorized_views(node: Node, nodes: Any, where: str) -> tuple[Node, _Views]:
    """The inner node and the node list its per-op check must see: the node's inputs are
    renumbered past the end of ``nodes`` (an id may be given once vectorized and once not) and
    seen with their vectorized axes stripped. Checks that every vectorized input and the output
    share the same k leading dimensions."""
    k, flags = node.opts["vectorized"], node.opts["vectorized_inputs"]
    batch = _batch(node.out, k)
    if batch is None:
        raise GraphError(f"{where}: vectorized: {k}, but the out has fewer than {k} axes "
                         f"(or tuple elements with different leading axes)")
    replaced: dict[int, Node] = {}
    for i, (ref, flag) in enumerate(zip(node.inputs, flags, strict=True)):
        source = nodes[ref]
        if flag and _batch(source.out, k) != batch:
            raise GraphError(
                f"{where}: vectorized input {ref} has shape {source.tensor.shape}, whose "
                f"{k} leading axes must be the output's {list(batch)}"
            )
        out = _strip(source.out, k) if flag else source.out
        replaced[len(nodes) + i] = Node(source.id, source.op, source.inputs, source.opts, out)
    inner = inner_node(node)
    synthetic = tuple(range(len(nodes), len(nodes) + len(node.inputs)))
    return Node(inner.id, inner.op, synthetic, inner.opts, inner.out), _Views(nodes, replaced)


def _check_refs(where: str, own: int, refs: Any, what: str) -> None:
    for ref in refs:
        if not 0 <= ref < own:
            raise GraphError(
                f"{where}: {what} refers to node {ref}; node ids referred to must be smaller "
                f"than the node's own id (topological order, no cycles or dangling ids)"
            )


# --- per-op structural checks -----------------------------------------------------------------


def check_tensor_out(node: Node, nodes: list[Node], where: str) -> None:
    if not isinstance(node.out, TensorOut):
        raise GraphError(f"{where}: out must be a tensor {{type, shape}}")


def _rank(nodes: list[Node], ref: int) -> int:
    return len(nodes[ref].tensor.shape)


def _check_axes(where: str, axes: tuple[int, ...], rank: int, name: str = "axes") -> None:
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise GraphError(f"{where}: {name} {list(axes)} invalid for rank {rank}")


def check_parameter(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)


def check_tensor(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    out = node.tensor
    want = out.size * to_dtype(out.type).itemsize
    if len(node.opts["data"]) != want:
        raise GraphError(
            f"{where}: data has {len(node.opts['data'])} bytes, {out} needs {want}"
        )


def check_iota(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    axis = node.opts["axis"]
    if axis is not None:
        _check_axes(where, (axis,), len(node.tensor.shape), "axis")


def check_comparison(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if node.tensor.type != NxType("u", 8):
        raise GraphError(f"{where}: a comparison's out type must be {{:u, 8}}")


def check_reduction(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    axes = node.opts["axes"]
    if axes is not None:
        _check_axes(where, axes, _rank(nodes, node.inputs[0]))


def check_predicate(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if node.tensor.type != NxType("u", 8):
        raise GraphError(f"{where}: out type must be {{:u, 8}} (a predicate)")


def check_predicate_reduction(node: Node, nodes: list[Node], where: str) -> None:
    check_predicate(node, nodes, where)
    check_reduction(node, nodes, where)


def check_integer_op(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if not node.tensor.type.is_integer:
        raise GraphError(f"{where}: works on integer types only, out is {node.tensor.type}")


def check_real_part(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if not node.tensor.type.is_float:
        raise GraphError(f"{where}: out type must be a float type, got {node.tensor.type}")


def check_bitcast(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source = nodes[node.inputs[0]].tensor
    if source.type.bits != node.tensor.type.bits or source.shape != node.tensor.shape:
        raise GraphError(f"{where}: bitcast needs the same shape and bit width, "
                         f"got {source} -> {node.tensor}")


def check_arg_reduction(node: Node, nodes: list[Node], where: str) -> None:
    check_integer_op(node, nodes, where)
    axis = node.opts["axis"]
    if axis is not None:
        _check_axes(where, (axis,), _rank(nodes, node.inputs[0]), "axis")


def check_scan(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_axes(where, (node.opts["axis"],), _rank(nodes, node.inputs[0]), "axis")


def check_window(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = _rank(nodes, node.inputs[0])
    for key in WINDOW_OPTS:
        if key in node.opts and len(node.opts[key]) != rank:
            raise GraphError(f"{where}: {key} must have one entry per axis ({rank})")
    for key in ("window_dimensions", "strides", "window_dilations"):
        if any(x < 1 for x in node.opts.get(key, ())):
            raise GraphError(f"{where}: {key} must be positive integers")


def check_window_scatter(node: Node, nodes: list[Node], where: str) -> None:
    check_window(node, nodes, where)
    rank = _rank(nodes, node.inputs[0])
    if node.tensor.shape != nodes[node.inputs[0]].tensor.shape:
        raise GraphError(f"{where}: out must have the shape of the input tensor")
    if _rank(nodes, node.inputs[1]) != rank or nodes[node.inputs[2]].tensor.shape != ():
        raise GraphError(f"{where}: source must have the input's rank and init_value must "
                         f"be a scalar")


def check_transpose(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = _rank(nodes, node.inputs[0])
    if sorted(node.opts["axes"]) != list(range(rank)):
        raise GraphError(f"{where}: axes {list(node.opts['axes'])} is not a permutation of "
                         f"0..{rank - 1}")


def check_broadcast(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    axes = node.opts["axes"]
    if len(axes) != _rank(nodes, node.inputs[0]):
        raise GraphError(f"{where}: axes must have one entry per input axis")
    _check_axes(where, axes, len(node.tensor.shape))


def check_slice(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = _rank(nodes, node.inputs[0])
    for key in ("start_indices", "lengths", "strides"):
        if len(node.opts[key]) != rank:
            raise GraphError(f"{where}: {key} must have {rank} entries")
    if any(s <= 0 for s in node.opts["strides"]):
        raise GraphError(f"{where}: strides must be positive")


def check_concatenate(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_axes(where, (node.opts["axis"],), len(node.tensor.shape), "axis")


def check_dot(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    left, right = (_rank(nodes, i) for i in node.inputs)
    for key in ("contract_axes", "batch_axes"):
        lhs, rhs = node.opts[key]
        if len(lhs) != len(rhs):
            raise GraphError(f"{where}: {key} lists must have the same length")
        _check_axes(where, lhs, left, key)
        _check_axes(where, rhs, right, key)


def check_elem(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source = nodes[node.inputs[0]]
    if not isinstance(source.out, TupleOut):
        raise GraphError(f"{where}: input {source.id} ({source.op}) is not tuple-valued")
    index = node.opts["index"]
    if index >= len(source.out.elements):
        raise GraphError(f"{where}: index {index} out of range for a "
                         f"{len(source.out.elements)}-tuple")
    if not isinstance(source.out.elements[index], TensorOut):
        raise GraphError(f"{where}: element {index} is itself a tuple")


def check_grad(node: Node, nodes: list[Node], where: str) -> None:
    y, *xs = node.inputs
    y_out = nodes[y].tensor
    if y_out.shape != () or not (y_out.type.is_float or y_out.type.is_complex):
        raise GraphError(f"{where}: y (node {y}) must be a floating or complex scalar, "
                         f"got {y_out}")
    out = node.out
    if not (isinstance(out, TupleOut) and len(out.elements) == len(xs)):
        raise GraphError(f"{where}: out must be a list with one entry per x ({len(xs)})")
    for x, element in zip(xs, out.elements, strict=True):
        if not (isinstance(element, TensorOut) and element.shape == nodes[x].tensor.shape):
            raise GraphError(f"{where}: the gradient for node {x} must have its shape")


def _check_differentiable_x(nodes: list[Node], where: str, x: int, complex_ok: bool) -> None:
    x_out = nodes[x].tensor
    if not (x_out.type.is_float or (complex_ok and x_out.type.is_complex)):
        kinds = "floating or complex" if complex_ok else "floating"
        raise GraphError(f"{where}: x (node {x}) must be {kinds}, got {x_out}")


def check_jvp(node: Node, nodes: list[Node], where: str) -> None:
    """``jvp`` [y, x1..xk, t1..tk]: each ti has the out of xi; out has y's shape."""
    check_tensor_out(node, nodes, where)
    if len(node.inputs) % 2 == 0:
        raise GraphError(f"{where}: takes y, then k x nodes and k tangents (an odd number of "
                         f"inputs), got {len(node.inputs)}")
    y, *rest = node.inputs
    k = len(rest) // 2
    for x, t in zip(rest[:k], rest[k:], strict=True):
        _check_differentiable_x(nodes, where, x, complex_ok=True)
        if nodes[t].tensor != nodes[x].tensor:
            raise GraphError(f"{where}: tangent (node {t}) must have the out of x (node {x}), "
                             f"{nodes[x].tensor}, got {nodes[t].tensor}")
    if node.tensor.shape != nodes[y].tensor.shape:
        raise GraphError(f"{where}: out must have the shape of y (node {y}), "
                         f"{list(nodes[y].tensor.shape)}")


def check_jacobian(node: Node, nodes: list[Node], where: str) -> None:
    """``jacfwd``/``jacrev`` [y, x1..xk]: out element j has shape y ++ xj; ``hessian``: element
    j * k + l has shape y ++ xj ++ xl. Real floating y and x only. With ``batch: b``, y and
    every x share their first b axes (independent entries), and x's shapes above are without
    them."""
    y, *xs = node.inputs
    y_out = nodes[y].tensor
    if not y_out.type.is_float:
        raise GraphError(f"{where}: y (node {y}) must be floating, got {y_out}")
    for x in xs:
        _check_differentiable_x(nodes, where, x, complex_ok=False)
    b = node.opts.get("batch", 0)
    lead = y_out.shape[:b]
    if len(lead) < b or any(nodes[x].tensor.shape[:b] != lead for x in xs):
        raise GraphError(f"{where}: with batch {b}, y and every x must share their first {b} "
                         f"axes, got y {list(y_out.shape)} and x "
                         f"{[list(nodes[x].tensor.shape) for x in xs]}")
    x_shapes = [nodes[x].tensor.shape[b:] for x in xs]
    if node.op == "hessian":
        want = [(*y_out.shape, *a, *b) for a in x_shapes for b in x_shapes]
    else:
        want = [(*y_out.shape, *a) for a in x_shapes]
    got = [o.shape for o in _tuple_outs(node, where)]
    if got != want:
        raise GraphError(f"{where}: out shapes must be {[list(s) for s in want]}, "
                         f"got {[list(s) for s in got]}")


def check_custom_jvp(node: Node, nodes: list[Node], where: str) -> None:
    """``custom_jvp`` [e1..em, w1..wk, c1..cn]: out the outs of the e; the jvp rule's
    parameters are one tangent per w (its out), then the captures; it returns one tangent
    per e (its out)."""
    outs = _tuple_outs(node, where)
    m, k = len(outs), node.opts["primals"]
    if len(node.inputs) < m + k or k < 1:
        raise GraphError(f"{where}: takes the {m} expressions, then {k} primal inputs (at "
                         f"least 1), then the captures; got {len(node.inputs)} inputs")
    if _inputs(node, nodes)[:m] != outs:
        raise GraphError(f"{where}: out must be the outs of its first {m} inputs")
    tangents = _inputs(node, nodes, m)[:k]
    captures = _inputs(node, nodes, m + k)
    _check_signature(where, "jvp", node.opts["jvp"], tangents + captures, outs)


def check_hook(node: Node, nodes: list[Node], where: str) -> None:
    want = [nodes[i].tensor for i in node.inputs]
    if _tuple_outs(node, where) != want:
        raise GraphError(f"{where}: out must be the list of its inputs' outs "
                         f"{[str(o) for o in want]}")


def check_attach_token(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if any(not isinstance(nodes[i].out, TensorOut) for i in node.inputs):
        raise GraphError(f"{where}: every input must be tensor-valued")
    last = nodes[node.inputs[-1]].tensor
    if node.tensor != last:
        raise GraphError(f"{where}: out must be the last input's out {last}, got {node.tensor}")


def check_custom_grad(node: Node, nodes: list[Node], where: str) -> None:
    wrt, cotangents, grads = (node.opts[k] for k in ("wrt", "cotangents", "grads"))
    m = len(node.inputs)
    if len(cotangents) != m:
        raise GraphError(f"{where}: needs one cotangent per expression ({m}), got "
                         f"{len(cotangents)}")
    if len(grads) != len(wrt):
        raise GraphError(f"{where}: needs one grad per wrt node ({len(wrt)}), got {len(grads)}")
    for c in cotangents:
        if nodes[c].op != "cotangent":
            raise GraphError(f"{where}: cotangent {c} is a {nodes[c].op} node, not :cotangent")
    for e, c in zip(node.inputs, cotangents, strict=True):
        if nodes[c].tensor.shape != nodes[e].tensor.shape:
            raise GraphError(f"{where}: cotangent {c} must have the shape of expression {e}")
    for ref in (*wrt, *grads):
        if not isinstance(nodes[ref].out, TensorOut):
            raise GraphError(f"{where}: wrt/grads node {ref} is tuple-valued")
    for w, gr in zip(wrt, grads, strict=True):
        if nodes[gr].tensor.shape != nodes[w].tensor.shape:
            raise GraphError(f"{where}: grad {gr} must have the shape of wrt node {w}")
    if node.opts["tuple"]:
        out = node.out
        if not (isinstance(out, TupleOut) and len(out.elements) == m):
            raise GraphError(f"{where}: with tuple: true, out must be a list of {m} outs")
    else:
        if m != 1:
            raise GraphError(f"{where}: with tuple: false, takes exactly 1 input, got {m}")
        check_tensor_out(node, nodes, where)


def _check_integer_input(node: Node, nodes: list[Node], where: str, ref: int, what: str) -> None:
    kind = nodes[ref].tensor.type.kind
    if kind not in ("s", "u"):
        raise GraphError(f"{where}: {what} (node {ref}) must have an integer type")


def check_pad(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    shape = nodes[node.inputs[0]].tensor.shape
    config = node.opts["padding_config"]
    if len(config) != len(shape):
        raise GraphError(f"{where}: padding_config must have one entry per axis ({len(shape)})")
    if nodes[node.inputs[1]].tensor.shape != ():
        raise GraphError(f"{where}: the pad value (node {node.inputs[1]}) must be a scalar")
    if any(interior < 0 for _, _, interior in config):
        raise GraphError(f"{where}: interior padding must be non-negative")


def check_reverse(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_axes(where, node.opts["axes"], _rank(nodes, node.inputs[0]))


def _check_start_indices(node: Node, nodes: list[Node], where: str, first: int, rank: int) -> None:
    starts = node.inputs[first:]
    if len(starts) != rank:
        raise GraphError(f"{where}: needs one start index input per axis ({rank}), "
                         f"got {len(starts)}")
    for ref in starts:
        if nodes[ref].tensor.shape != ():
            raise GraphError(f"{where}: start index (node {ref}) must be a scalar")
        _check_integer_input(node, nodes, where, ref, "start index")


def check_dynamic_slice(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    shape = nodes[node.inputs[0]].tensor.shape
    _check_start_indices(node, nodes, where, 1, len(shape))
    lengths = node.opts["lengths"]
    if len(lengths) != len(shape) or any(
        not 0 <= n <= d for n, d in zip(lengths, shape, strict=True)
    ):
        raise GraphError(f"{where}: lengths {list(lengths)} invalid for shape {shape}")


def check_put_slice(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    shape = nodes[node.inputs[0]].tensor.shape
    update = nodes[node.inputs[1]].tensor.shape
    _check_start_indices(node, nodes, where, 2, len(shape))
    if len(update) != len(shape) or any(u > d for u, d in zip(update, shape, strict=True)):
        raise GraphError(f"{where}: slice shape {update} does not fit in {shape}")


def check_indexing(node: Node, nodes: list[Node], where: str) -> None:
    """gather, indexed_add, indexed_put: indices [..., len(axes)] into ``axes``."""
    check_tensor_out(node, nodes, where)
    _check_integer_input(node, nodes, where, node.inputs[1], "indices")
    axes = node.opts["axes"]
    _check_axes(where, axes, _rank(nodes, node.inputs[0]))
    indices = nodes[node.inputs[1]].tensor.shape
    if not indices or indices[-1] != len(axes):
        raise GraphError(f"{where}: the last dimension of indices {indices} must equal the "
                         f"number of axes ({len(axes)})")


def check_take(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_integer_input(node, nodes, where, node.inputs[1], "indices")
    rank = _rank(nodes, node.inputs[0])
    _check_axes(where, (node.opts["axis"],), rank, "axis")
    if node.op == "take_along_axis" and _rank(nodes, node.inputs[1]) != rank:
        raise GraphError(f"{where}: indices must have the rank of the tensor ({rank})")


def check_sort(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_axes(where, (node.opts["axis"],), _rank(nodes, node.inputs[0]), "axis")


def check_conv(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = _rank(nodes, node.inputs[0])
    if rank < 3 or _rank(nodes, node.inputs[1]) != rank:
        raise GraphError(f"{where}: input and kernel must have the same rank, at least 3")
    spatial = rank - 2
    for key in ("strides", "padding", "input_dilation", "kernel_dilation"):
        if len(node.opts[key]) != spatial:
            raise GraphError(f"{where}: {key} must have one entry per spatial axis ({spatial})")
    for key in ("strides", "input_dilation", "kernel_dilation"):
        if any(v < 1 for v in node.opts[key]):
            raise GraphError(f"{where}: {key} must be positive")
    for key in ("input_permutation", "kernel_permutation", "output_permutation"):
        if sorted(node.opts[key]) != list(range(rank)):
            raise GraphError(f"{where}: {key} must be a permutation of 0..{rank - 1}")
    if node.opts["feature_group_size"] < 1 or node.opts["batch_group_size"] < 1:
        raise GraphError(f"{where}: group sizes must be positive")


def _check_matrix(node: Node, nodes: list[Node], where: str, square: bool = True) -> None:
    shape = nodes[node.inputs[0]].tensor.shape
    if len(shape) < 2 or (square and shape[-1] != shape[-2]):
        kind = "square matrix" if square else "matrix"
        raise GraphError(f"{where}: input (node {node.inputs[0]}) must be a {kind} (or a batch "
                         f"of them), got shape {shape}")


def check_linalg(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_matrix(node, nodes, where)


def check_linalg_tuple(node: Node, nodes: list[Node], where: str) -> None:
    want = {"qr": 2, "lu": 3, "svd": 3, "eigh": 2}[node.op]
    out = node.out
    if not (isinstance(out, TupleOut) and len(out.elements) == want
            and all(isinstance(e, TensorOut) for e in out.elements)):
        raise GraphError(f"{where}: out must be a list of {want} tensor outs")
    _check_matrix(node, nodes, where, square=node.op in ("lu", "eigh"))


def check_fourier(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source, out, n = nodes[node.inputs[0]].tensor, node.tensor, node.opts["length"]
    if not out.type.is_complex:
        raise GraphError(f"{where}: out type must be complex ({{:c, 64}} or {{:c, 128}}), "
                         f"got {out.type}")
    if not source.shape:
        raise GraphError(f"{where}: the input must have at least one axis (the transform runs "
                         f"along the last one)")
    if n < 1:
        raise GraphError(f"{where}: length must be a positive integer, got {n}")
    if out.shape != (*source.shape[:-1], n):
        raise GraphError(f"{where}: out shape must be the input shape {source.shape} with the "
                         f"last axis replaced by length {n}, got {out.shape}")


def check_fourier2(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source, out = nodes[node.inputs[0]].tensor, node.tensor
    axes, lengths = node.opts["axes"], node.opts["lengths"]
    if not out.type.is_complex:
        raise GraphError(f"{where}: out type must be complex ({{:c, 64}} or {{:c, 128}}), "
                         f"got {out.type}")
    if len(axes) != 2 or len(lengths) != 2:
        raise GraphError(f"{where}: axes and lengths must each have two entries, got axes "
                         f"{list(axes)} and lengths {list(lengths)}")
    _check_axes(where, axes, len(source.shape), "axes")
    if any(n < 1 for n in lengths):
        raise GraphError(f"{where}: lengths must be positive integers, got {list(lengths)}")
    want = list(source.shape)
    for axis, n in zip(axes, lengths, strict=True):
        want[axis] = n
    if out.shape != tuple(want):
        raise GraphError(f"{where}: out shape must be the input shape {source.shape} with axes "
                         f"{list(axes)} replaced by lengths {list(lengths)}, got {out.shape}")


def check_top_k(node: Node, nodes: list[Node], where: str) -> None:
    source, k, out = nodes[node.inputs[0]].tensor, node.opts["k"], node.out
    if not (isinstance(out, TupleOut) and len(out.elements) == 2
            and all(isinstance(e, TensorOut) for e in out.elements)):
        raise GraphError(f"{where}: out must be a list of 2 tensor outs (values, indices)")
    values, indices = out.elements
    assert isinstance(values, TensorOut) and isinstance(indices, TensorOut)
    if not source.shape:
        raise GraphError(f"{where}: the input must have at least one axis (top_k runs along "
                         f"the last one)")
    if source.type.is_complex:
        raise GraphError(f"{where}: the input must be real, got {source.type}")
    if not 1 <= k <= source.shape[-1]:
        raise GraphError(f"{where}: k must be between 1 and the last dimension "
                         f"{source.shape[-1]}, got {k}")
    want = (*source.shape[:-1], k)
    if values.shape != want or indices.shape != want:
        raise GraphError(f"{where}: values and indices must have shape {want}, got "
                         f"{values.shape} and {indices.shape}")
    if values.type != source.type or not indices.type.is_integer:
        raise GraphError(f"{where}: values must have the input's type {source.type} and "
                         f"indices an integer type, got {values.type} and {indices.type}")


# ops carrying sub-graphs (PROTOCOL.md 4.3)


def _check_signature(where: str, what: str, graph: Graph, expected: list[TensorOut],
                     outputs: list[TensorOut]) -> None:
    """A sub-graph's parameters (index -> out) must be among ``expected`` and its outputs
    must be exactly ``outputs``."""
    for index, out in graph.parameters.items():
        if index >= len(expected):
            raise GraphError(f"{where}: {what} has parameter {index}, but only {len(expected)} "
                             f"values are passed to it")
        if out != expected[index]:
            raise GraphError(f"{where}: {what} declares parameter {index} as {out}, the value "
                             f"passed is {expected[index]}")
    got = [graph.nodes[o].tensor for o in graph.outputs]
    if got != outputs:
        raise GraphError(f"{where}: {what} must return {[str(o) for o in outputs]}, "
                         f"its outputs are {[str(o) for o in got]}")


def _tuple_outs(node: Node, where: str) -> list[TensorOut]:
    out = node.out
    if not (isinstance(out, TupleOut) and all(isinstance(e, TensorOut) for e in out.elements)):
        raise GraphError(f"{where}: out must be a list of tensor outs")
    return [e for e in out.elements if isinstance(e, TensorOut)]


def _inputs(node: Node, nodes: list[Node], start: int = 0) -> list[TensorOut]:
    return [nodes[i].tensor for i in node.inputs[start:]]


def check_cond(node: Node, nodes: list[Node], where: str) -> None:
    outs = _tuple_outs(node, where)
    branches = node.opts["branches"]
    preds = len(branches) - 1
    if preds < 1 or len(node.inputs) < preds:
        raise GraphError(f"{where}: needs at least 2 branches and one predicate input per "
                         f"branch but the last ({len(branches)} branches, "
                         f"{len(node.inputs)} inputs)")
    for ref in node.inputs[:preds]:
        if nodes[ref].tensor.shape != ():
            raise GraphError(f"{where}: predicate (node {ref}) must be a scalar")
    captures = _inputs(node, nodes, preds)
    for i, branch in enumerate(branches):
        _check_signature(where, f"branch {i}", branch, captures, outs)


def check_loop(node: Node, nodes: list[Node], where: str) -> None:
    state = _tuple_outs(node, where)
    n = len(state)
    if len(node.inputs) < n or _inputs(node, nodes)[:n] != state:
        raise GraphError(f"{where}: the first {n} inputs (the initial state) must have the "
                         f"outs of the result, {[str(s) for s in state]}")
    captures = _inputs(node, nodes, n)
    if node.op == "while":
        condition = node.opts["condition"]
        scalar = [condition.nodes[o].tensor for o in condition.outputs]
        if len(scalar) != 1 or scalar[0].shape != ():
            raise GraphError(f"{where}: condition must have one scalar output")
        _check_signature(where, "condition", node.opts["condition"], state + captures, scalar)
        _check_signature(where, "body", node.opts["body"], state + captures, state)
    else:
        if node.opts["step"] == 0:
            raise GraphError(f"{where}: step must not be 0")
        index = [TensorOut(NxType("s", 64), ())]
        _check_signature(where, "body", node.opts["body"], state + index + captures, state)


def check_reduce_with(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    out = node.tensor
    scalar = TensorOut(out.type, ())
    x, acc = (nodes[i].tensor for i in node.inputs[:2])
    if x.type != out.type or acc != scalar:
        raise GraphError(f"{where}: the tensor and the accumulator (a scalar) must have the out "
                         f"type {out.type}, got {x} and {acc}")
    if node.op == "reduce":
        check_reduction(node, nodes, where)
    else:
        check_window(node, nodes, where)
    expected = [scalar, scalar, *_inputs(node, nodes, 2)]
    _check_signature(where, "reducer", node.opts["reducer"], expected, [scalar])


def _linear_maps(graph: Graph) -> list[Node]:
    """The ``linear_map`` nodes of ``graph``, of the sub-graphs nested in it too (a solver's
    loop body applies the map it was given)."""
    found = []
    for node in graph.nodes:
        if node.op == "linear_map":
            found.append(node)
        for sub in _subgraphs(node):
            if isinstance(sub, Graph) and node.op not in ("custom_root", "custom_linear_solve"):
                found.extend(_linear_maps(sub))
    return found


def _check_solver(where: str, what: str, graph: Graph, unknown: TensorOut,
                  captures: list[TensorOut], maps: bool) -> None:
    """A solver's sub-graph: parameter 0 is shaped like the unknown, then the captures; one
    output shaped like it; its ``linear_map`` nodes (allowed where ``maps``) map such values."""
    _check_signature(where, what, graph, [unknown, *captures], [unknown])
    for node in _linear_maps(graph):
        if not maps:
            raise GraphError(f"{where}: {what} applies a linear_map (node {node.id}), but no "
                             f"linear map is passed to it")
        if node.tensor != unknown:
            raise GraphError(f"{where}: {what}'s linear_map node {node.id} must map {unknown} "
                             f"to {unknown}, its out is {node.tensor}")


def check_custom_root(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    unknown = node.tensor
    if nodes[node.inputs[0]].tensor != unknown or not unknown.type.is_float:
        raise GraphError(f"{where}: the initial guess must have the out {unknown}, a float type")
    captures = _inputs(node, nodes, 1)
    _check_solver(where, "f", node.opts["f"], unknown, captures, False)
    _check_solver(where, "solve", node.opts["solve"], unknown, captures, False)
    _check_solver(where, "tangent_solve", node.opts["tangent_solve"], unknown, captures, True)


def check_custom_linear_solve(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    unknown = node.tensor
    if nodes[node.inputs[0]].tensor != unknown or not unknown.type.is_float:
        raise GraphError(f"{where}: b must have the out {unknown}, a float type")
    captures = _inputs(node, nodes, 1)
    _check_solver(where, "matvec", node.opts["matvec"], unknown, captures, False)
    _check_solver(where, "solve", node.opts["solve"], unknown, captures, True)
    if node.opts["transpose_solve"] is not None:
        _check_solver(where, "transpose_solve", node.opts["transpose_solve"], unknown, captures,
                      True)


def check_linear_map(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if nodes[node.inputs[0]].tensor != node.tensor:
        raise GraphError(f"{where}: the argument of a linear_map must have its out {node.tensor}")


def check_checkpoint(node: Node, nodes: list[Node], where: str) -> None:
    """``fun``'s parameters are the inputs (the arguments' leaves, then the captures), its
    outputs the node's outs."""
    _check_signature(where, "fun", node.opts["fun"], _inputs(node, nodes), _tuple_outs(node, where))
