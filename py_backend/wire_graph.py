"""The wire graph (PROTOCOL.md section 4): its data model, and its decoding and validation.

Nothing here calls JAX, and nothing names an op's rules: which ops exist, their arity, options
and checks, come from the registry the decoder is given (:mod:`py_backend.registry`;
:func:`py_backend.program.decode_graph` gives it). Defined here: the data model (:class:`Graph`,
:class:`Node`, outs), the option kinds, and the helpers the ops' checks share. Every rule of the
protocol is checked before anything is lowered; a violation raises :class:`GraphError` naming
the node id and op.

    >>> from py_backend.channel import atom, encode
    >>> f32 = (atom("f"), 32)
    >>> term = (atom("nx_jax_graph"), 1,
    ...         [(0, atom("parameter"), [], {atom("index"): 0}, (f32, ())),
    ...          (1, atom("exp"), [0], {}, (f32, ()))], [1])
    >>> from py_backend.registry import REGISTRY
    >>> g = decode_graph(encode(term), REGISTRY)
    >>> g.nodes[1].op, g.nodes[1].inputs, g.outputs
    ('exp', (0,), (1,))
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from py_backend import channel
from py_backend.nxtypes import SUPPORTED, NxType, wire_dtype

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


class OpSpec(Protocol):
    """What decoding reads of an op's registration (py_backend.ops.rules.Op)."""

    @property
    def min_arity(self) -> int: ...
    @property
    def max_arity(self) -> int | None: ...
    @property
    def opts(self) -> Mapping[str, Kind]: ...
    @property
    def defaults(self) -> Mapping[str, Any]: ...
    @property
    def check(self) -> Callable[[Node, list[Node], str], None]: ...


Registry = Mapping[str, OpSpec]


@dataclass(frozen=True)
class SubgraphKind:
    """An option holding sub-graphs (PROTOCOL.md 4.3): parsed from the raw term with
    :func:`parse_graph`, one graph (``many=False``) or a non-empty list of them; with
    ``nullable``, ``nil`` (no graph) too."""

    many: bool = False
    nullable: bool = False

    def __call__(self, v: Any) -> Any:  # a Kind; _parse_node calls parse() instead
        raise ValueError("a graph term")

    def parse(self, raw: Any, limit: int, registry: Registry) -> Any:
        if self.nullable and raw is None:
            return None
        if not self.many:
            return parse_graph(raw, registry, limit)
        if not (isinstance(raw, list) and raw):
            raise GraphError("must be a non-empty list of graphs")
        return tuple(parse_graph(g, registry, limit) for g in raw)


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


def max_elements_from_env() -> int:
    raw = os.environ.get("NX_JAX_MAX_ELEMENTS")
    return DEFAULT_MAX_ELEMENTS if raw is None or raw.strip() == "" else int(raw)


def decode_graph(data: bytes | bytearray | memoryview, registry: Registry,
                 max_elements: int | None = None) -> Graph:
    """``graph_bin`` (``term_to_binary(graph)``) -> :class:`Graph`, validated against the ops
    of ``registry``."""
    try:
        term = channel.decode(data)
    except channel.CodecError as exc:
        raise GraphError(f"graph binary is not an Erlang term: {exc}") from exc
    return parse_graph(term, registry, max_elements)


def parse_graph(term: Any, registry: Registry, max_elements: int | None = None) -> Graph:
    """A decoded graph term -> :class:`Graph`, validated against the ops of ``registry``."""
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
        or any(isinstance(v, Graph) and v.hooks for v in subgraphs_of(node))
        for node in nodes
    )
    return Graph(PROTOCOL_VERSION, tuple(nodes), tuple(outputs), parameters, hooks)


def subgraphs_of(node: Node) -> list[Any]:
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
    raw: Any, position: int, nodes: list[Node], limit: int, registry: Registry
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
                opts[key] = kind.parse(raw, limit, registry)
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


def check_tensor_out(node: Node, nodes: list[Node], where: str) -> None:
    if not isinstance(node.out, TensorOut):
        raise GraphError(f"{where}: out must be a tensor {{type, shape}}")


def rank_of(nodes: list[Node], ref: int) -> int:
    return len(nodes[ref].tensor.shape)


def check_axes(where: str, axes: tuple[int, ...], rank: int, name: str = "axes") -> None:
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise GraphError(f"{where}: {name} {list(axes)} invalid for rank {rank}")


def check_signature(where: str, what: str, graph: Graph, expected: list[TensorOut],
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


def tuple_outs(node: Node, where: str) -> list[TensorOut]:
    out = node.out
    if not (isinstance(out, TupleOut) and all(isinstance(e, TensorOut) for e in out.elements)):
        raise GraphError(f"{where}: out must be a list of tensor outs")
    return [e for e in out.elements if isinstance(e, TensorOut)]


def input_outs(node: Node, nodes: list[Node], start: int = 0) -> list[TensorOut]:
    return [nodes[i].tensor for i in node.inputs[start:]]
