"""torch.compile(model, backend="tensorjit").

Dynamo hands over an FX graph; AOTAutograd (aot_module_simplified, as
Inductor and other backends use it) functionalizes it, decomposes it to
Core ATen (torch._decomp.core_aten_decompositions(), less the few ops
tensorjit lowers better whole) and, when gradients are needed, splits the
joint graph into a forward and a backward (its min-cut partitioner). Each
graph is then:

- split where ops have no row (partition.py: CapabilityBasedPartitioner):
  the supported parts are compiled by tensorjit, the rest runs eagerly
  between them (TJ_LOG=torch names each op that does);
- lowered node by node through the rows of aten.py (lower.py) into one
  tensorjit.jit function per part (graph.py), with symbolic sizes as one
  symbolic compilation, parameters frozen for inference, and torch tensors
  in and out without copies.

options (torch.compile(..., options={...})):
  freeze_parameters  True (default): inference graphs fold parameters and
                     buffers into the compilation; False: they are inputs.
  weights            "f32" (default), "bf16" or "int8": how frozen matrix
                     weights are stored (tensorjit.jit's weights=).
  eager_fallback     True (default): ops without a row run eagerly between
                     compiled parts; False: they are an error naming the op
                     and the node (what scripts/torch-conformance uses).
  interpret          False (default); True: tensorjit's reference
                     interpreter runs the graphs instead of generated code
                     (for testing the lowering alone).
"""

from __future__ import annotations

import functools

from .graph import log, stats  # noqa: F401

_OPTIONS = ("freeze_parameters", "weights", "eager_fallback", "interpret")


@functools.lru_cache(maxsize=None)
def _decompositions(training):
    import torch
    from torch._decomp import core_aten_decompositions, get_decompositions

    aten = torch.ops.aten
    table = dict(core_aten_decompositions())
    # Lowered whole: one IR op, or a builder that does better than the decomposition.
    for op in (aten.hardswish, aten.silu, aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d,
               aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d, aten.roll, aten._safe_softmax,
               # flash attention, forward and backward: the IR's own ops (torch's decomposition of the
               # forward gives a second output that is not the log-sum-exp its backward reads)
               aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_flash_attention_for_cpu_backward):
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    # Backward ops with no row, written in ops that have one.
    table.update(get_decompositions([aten.max_pool2d_with_indices_backward, aten.silu_backward, aten.hardswish_backward]))
    return table


def _compiler(kind, options):
    def compile_graph(gm, example_inputs):
        from torch._functorch.aot_autograd import make_boxed_func
        from .partition import compile_parts
        return make_boxed_func(compile_parts(gm, example_inputs, kind, options))
    return compile_graph


@functools.lru_cache(maxsize=None)
def _share_threads(torch):
    """Compiled code's parallel loops on torch's OpenMP threads: torch's
    threads spin for a while after each of its operators, and a second set
    of threads would take the cores from them (a GPT-2 decode step: 9%)."""
    from .. import _core
    if torch.backends.openmp.is_available() and _core._share_openmp_threads(True):
        log("parallel loops on torch's OpenMP threads")


def backend(gm, example_inputs, options=None):
    """The torch.compile backend (the torch_dynamo_backends entry point "tensorjit")."""
    import torch
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    options = dict(options or {})
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise ValueError(f"tensorjit: unknown option(s) {sorted(unknown)} (the options are {', '.join(_OPTIONS)})")
    _share_threads(torch)
    training = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in example_inputs)
    return aot_module_simplified(
        gm, example_inputs,
        fw_compiler=_compiler("forward", options),
        bw_compiler=_compiler("backward", options),
        inference_compiler=_compiler("inference", options),
        decompositions=_decompositions(training),
        partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"),
    )
