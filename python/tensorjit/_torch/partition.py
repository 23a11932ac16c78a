"""A graph whose ops all have rows is compiled whole. Otherwise it is split
(torch.fx's CapabilityBasedPartitioner, as Inductor's and ORT's backends
do): the parts of supported ops are compiled by tensorjit, the others run
eagerly between them. A node that a row refuses when its part is traced
(an argument it cannot lower: a symbolic size where a static one is
needed, say) is moved out and the graph split again, at the first call."""

from __future__ import annotations

import torch
import torch.fx as fx

from . import aten as rows
from .graph import CompiledGraph, log
from .lower import LoweringError, find_row, target_name

_MAX_SPLITS = 32  # nodes moved out of compiled parts at run time, per graph


def _supported_dtype(v):
    if isinstance(v, torch.Tensor):
        return v.dtype in rows._TO_TJ
    if isinstance(v, (list, tuple)):
        return all(_supported_dtype(x) for x in v)
    return not isinstance(v, complex)


def _why_not(node):
    """None when tensorjit lowers the node; else why not."""
    if node.op != "call_function":
        return None
    if find_row(node) is None:
        return rows.EAGER.get(getattr(node.target, "overloadpacket", None), "no row")
    if not _supported_dtype(node.meta.get("val")):
        return f"a dtype tensorjit lacks ({node.meta.get('val').dtype})"
    for a in node.all_input_nodes:
        if not _supported_dtype(a.meta.get("val")):
            return "an operand of a dtype tensorjit lacks"
    return None


def _static_inputs(kind, n):
    """Inputs to freeze: the parameters and buffers of an inference graph
    (Dynamo's static inputs) that the graph does not write."""
    if kind != "inference":
        return set()
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None:
        return set()
    static = set(getattr(meta, "static_input_indices", None) or [])
    info = getattr(meta, "input_info", None) or []
    mutated = {i for i, inf in enumerate(info) if getattr(inf, "mutates_data", False) or getattr(inf, "mutates_metadata", False)}
    return {i for i in static - mutated if i < n}


class _Part(torch.nn.Module):
    def __init__(self, graph, single):
        super().__init__()
        self.graph_ = graph
        self.single = single

    def forward(self, *args):
        r = self.graph_(*args)
        return r[0] if self.single else tuple(r)


class Parts:
    """The callable AOTAutograd gets: the graph compiled whole, or split."""

    def __init__(self, gm, example_inputs, kind, options):
        self.gm, self.kind, self.options = gm, kind, options
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for n, e in zip(self.placeholders, example_inputs):
            n.meta.setdefault("val", e)
        freeze = options.get("freeze_parameters", True) is not False
        self.freeze = _static_inputs(kind, len(self.placeholders)) if freeze else set()
        self.weights = options.get("weights", "f32")
        self.compile = not options.get("interpret", False)
        self.fallback = options.get("eager_fallback", True) is not False
        self.moved = set()  # nodes moved out at run time (their rows refused them)
        self.splits = 0
        self._build()

    def _build(self):
        eager = {n: _why_not(n) for n in self.gm.graph.nodes}
        eager = {n: why for n, why in eager.items() if why}
        for n in self.moved:
            eager[n] = "its row refused it"
        if eager and not self.fallback:
            n, why = next(iter(eager.items()))
            raise LoweringError(n, f"not supported ({why}), and eager_fallback is off")
        if not eager:
            self.run = CompiledGraph(self.gm, None, name=f"{self.kind}_graph", freeze=self.freeze, weights=self.weights, compile=self.compile)
            self.whole = True
            log(f"{self.kind} graph of {len(self.gm.graph.nodes)} nodes: compiled whole")
            return
        self.whole = False
        for n, why in eager.items():
            log(f"{self.kind} graph: {target_name(n)} (node {n.name}) runs eagerly: {why}")
        self.run = self._split(set(eager))

    def _split(self, eager):
        from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
        from torch.fx.passes.operator_support import OperatorSupport

        names = {n.name for n in eager}

        class Support(OperatorSupport):
            def is_node_supported(self, submodules, node):
                return node.op == "call_function" and node.name not in names

        gm = fx.GraphModule(self.gm, self.gm.graph)  # the partitioner rewrites a copy's graph
        gm.graph = _copy_graph(self.gm.graph)
        partitioner = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=True)
        parts = [p for p in partitioner.propose_partitions() if _worth_compiling(p.nodes)]
        fused = partitioner.fuse_partitions(parts)
        top = {n.name: i for i, n in enumerate(self.placeholders)}
        count = 0
        for node in list(fused.graph.nodes):
            if node.op != "call_module":
                continue
            sub = fused.get_submodule(node.target)
            sub_ph = [n for n in sub.graph.nodes if n.op == "placeholder"]
            for p, a in zip(sub_ph, node.args):
                if isinstance(a, fx.Node):
                    p.meta["val"] = a.meta.get("val")
            freeze = {k for k, a in enumerate(node.args) if isinstance(a, fx.Node) and a.op == "placeholder" and top.get(a.name) in self.freeze}
            out = next(n for n in sub.graph.nodes if n.op == "output")
            single = not isinstance(out.args[0], (list, tuple))
            for n in sub.graph.nodes:  # the outputs' values, for the runner's output kinds
                if n.op == "call_function" and "val" not in n.meta:
                    n.meta["val"] = None
            setattr(fused, node.target, _Part(CompiledGraph(sub, None, name=f"{self.kind}_part{count}", freeze=freeze,
                                                            weights=self.weights, compile=self.compile), single))
            count += 1
        fused.recompile()
        log(f"{self.kind} graph of {len(self.gm.graph.nodes)} nodes: {count} compiled part(s), {len(eager)} op(s) eager")
        return fused

    def __call__(self, *args):
        try:
            return self.run(*args)
        except LoweringError as e:
            node = next((n for n in self.gm.graph.nodes if n.name == e.node.name), None)
            if node is None or node in self.moved or self.splits >= _MAX_SPLITS or not self.fallback:
                raise
            self.splits += 1
            log(f"{e}: runs eagerly from now on")
            self.moved.add(node)
            self._build()
            return self(*args)


def _worth_compiling(nodes):
    """A part that computes something (not only views and size arithmetic)."""
    trivial = {torch.ops.aten.view, torch.ops.aten._unsafe_view, torch.ops.aten.reshape, torch.ops.aten.permute,
               torch.ops.aten.expand, torch.ops.aten.unsqueeze, torch.ops.aten.squeeze, torch.ops.aten.alias,
               torch.ops.aten.clone, torch.ops.aten.t, torch.ops.aten.slice, torch.ops.aten.select, torch.ops.aten.sym_size}
    return any(getattr(n.target, "overloadpacket", n.target) not in trivial and n.target.__module__ != "_operator"
               for n in nodes if n.op == "call_function")


def _copy_graph(g):
    new = fx.Graph()
    env = {}
    out = new.graph_copy(g, env)
    new.output(out)
    for old, n in env.items():
        n.meta = dict(old.meta)
    return new


def compile_parts(gm, example_inputs, kind, options):
    return Parts(gm, example_inputs, kind, options)
