"""tensorjit.jit: a Python function of arrays, traced by the C++ JIT.

The arguments are flattened: arrays (numpy, or anything with DLPack) become
the JIT's tensors, Python numbers and bools its guarded values; lists,
tuples, dicts, strings and None are the call's structure, which is a guard
too (one C++ JIT per structure). Guards, recompilation, dynamic shapes and
graph breaks are the C++ JIT's (include/tensorjit/jit.h)."""

from __future__ import annotations

import functools
import itertools
import inspect
import linecache
import threading
import warnings
import weakref

import numpy as np

from . import _core

_POLICIES = {None: "automatic", True: "symbolic", False: "static", "bucketed": "bucketed"}

# mark_dynamic: arrays whose axes are symbolic (or bucketed) whatever the policy.
_marks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_marks_by_id: dict = {}


def mark_dynamic(array, axis, bucketed=False):
    """Compile `array`'s `axis` for every size (or, bucketed, for padded sizes),
    as torch._dynamo.mark_dynamic does."""
    entry = (axis, 1 if bucketed else 2)
    try:
        _marks.setdefault(array, []).append(entry)
    except TypeError:  # not weak-referenceable: by id, for this call only
        _marks_by_id.setdefault(id(array), []).append(entry)
    return array


def _is_array(x):
    return hasattr(x, "__array_interface__") or hasattr(x, "__dlpack__")


_ndarray = np.ndarray


class _Frozen:
    """An argument whose arrays are frozen into the compilation (freeze=)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _frozen_spec(x, arrays):
    """The structure of a frozen argument with each array's identity (a
    different array is a new compilation), its arrays into `arrays`."""
    t = type(x)
    if t is _ndarray or (t not in (list, tuple, dict) and _is_array(x)):
        arrays.append(x)
        return ("a", id(x))
    if t is tuple or t is list:
        return ("u" if t is tuple else "l", tuple([_frozen_spec(e, arrays) for e in x]))
    if t is dict:
        return ("d", tuple(x), tuple([_frozen_spec(v, arrays) for v in x.values()]))
    return ("c", x if isinstance(x, (int, float, bool, str, type(None))) else id(x))


_frozen_cache: dict = {}


def _frozen_of(x, arrays):
    """_frozen_spec, remembered for a dict or list of arrays seen before (the
    same object holding the same arrays): weights are passed on every call."""
    if type(x) is dict:
        key = (id(x), tuple(map(id, x.values())))
    elif type(x) in (list, tuple):
        key = (id(x), tuple(map(id, x)))
    else:
        return _frozen_spec(x, arrays)
    hit = _frozen_cache.get(key)
    if hit is not None and hit[2] is x:
        arrays.extend(hit[1])
        return hit[0]
    found = []
    spec = _frozen_spec(x, found)
    if len(_frozen_cache) > 256:
        _frozen_cache.clear()
    _frozen_cache[key] = (spec, found, x)
    arrays.extend(found)
    return spec


_NO_KWARGS = ("d", (), ())

# The kinds of positional argument the fast path (_core._FastCalls) checks
# and converts itself: a numpy array, a float, an int, a bool, a frozen
# weight (or flat container of weights) by identity, a constant (None, str),
# a dict (str keys), list or tuple of numpy arrays. Their numbers, and the
# results' forms, are the C++ side's (python/src/calls.cpp).
_ARRAY, _FLOAT, _INT, _BOOL, _FROZEN, _CONST, _ARRAYS = (
    _core._FAST_ARG_KINDS[k] for k in ("array", "float", "int", "bool", "frozen", "const", "arrays"))
_ONE, _TUPLE, _LIST, _OTHER = (_core._FAST_RESULT_FORMS[k] for k in ("one", "tuple", "list", "other"))
_FAST_KIND = {float: _FLOAT, int: _INT, bool: _BOOL, type(None): _CONST, str: _CONST}


def _fast_kind(x, t):
    """The fast path's kind of a positional argument that is not frozen, or None."""
    kind = _FAST_KIND.get(t)
    if kind is not None:
        return kind
    if t is dict:
        ok = all(type(k) is str for k in x) and all(type(v) is _ndarray for v in x.values())
    elif t is list or t is tuple:
        ok = all(type(v) is _ndarray for v in x)
    else:
        ok = False
    return _ARRAYS if ok else None


def _fast_frozen(x):
    """A frozen argument the fast path can check by identity: an array, or a
    dict, list or tuple of things that are not containers."""
    t = type(x)
    if t is dict:
        items = x.values()
    elif t is list or t is tuple:
        items = x
    else:
        return t not in (list, tuple, dict)
    return not any(type(v) in (list, tuple, dict) for v in items)


def _form(spec):
    """How the fast path builds the results: one array, a tuple or a list of
    them in order, or anything else through _unflatten."""
    if spec == ("t", 0):
        return _ONE
    if spec[0] in ("u", "l") and all(s == ("t", i) for i, s in enumerate(spec[1])):
        return _TUPLE if spec[0] == "u" else _LIST
    return _OTHER


class _Arrays(list):
    """The call's arrays, and apart from them the frozen ones."""

    __slots__ = ("frozen",)


def _flatten(x, tensors, values):
    """The structure of x (hashable), its arrays into `tensors` and its
    numbers into `values`. Exact types first: this runs on every call."""
    t = type(x)
    if t is _ndarray:
        tensors.append(x)
        return ("t", len(tensors) - 1)
    if t is float or t is int or t is bool:
        values.append(x)
        return ("v", len(values) - 1)
    if t is tuple or t is list:
        return ("u" if t is tuple else "l", tuple([_flatten(e, tensors, values) for e in x]))
    if t is dict:
        keys = tuple(x)
        if not all(isinstance(k, (str, int)) for k in keys):
            raise TypeError("tensorjit.jit: dict arguments need str or int keys")
        return ("d", keys, tuple([_flatten(x[k], tensors, values) for k in keys]))
    if x is None or t is str:
        return ("c", x)
    if t is _Frozen:
        return ("f", _frozen_of(x.value, tensors.frozen))
    if isinstance(x, (bool, int, float)) and not _is_array(x):
        values.append(x)
        return ("v", len(values) - 1)
    if _is_array(x):
        tensors.append(x)
        return ("t", len(tensors) - 1)
    if isinstance(x, (list, tuple)):
        return ("l" if isinstance(x, list) else "u", tuple(_flatten(e, tensors, values) for e in x))
    if isinstance(x, dict):
        return _flatten(dict(x), tensors, values)
    if isinstance(x, str):
        return ("c", str(x))
    raise TypeError(f"tensorjit.jit: an argument of type {type(x).__name__} is not supported "
                    "(arrays, numbers, bools, strings, None, and lists, tuples and dicts of them are)")


def _rebuild_frozen(spec, args, it):
    kind = spec[0]
    if kind == "a":
        k = next(it)
        return args.param(f"frozen{k}", _tls.frozen[k], _tls.borrow)
    if kind in ("u", "l"):
        items = [_rebuild_frozen(s, args, it) for s in spec[1]]
        return items if kind == "l" else tuple(items)
    if kind == "d":
        return {k: _rebuild_frozen(s, args, it) for k, s in zip(spec[1], spec[2])}
    return spec[1]


# A trace's arguments, per thread: _call's values and frozen arrays (call),
# and while _rebuild runs, what it reads.
_tls = threading.local()


def _rebuild(spec, args):
    kind = spec[0]
    if kind == "f":
        return _rebuild_frozen(spec[1], args, _tls.counter)
    if kind == "t":
        return args.tensor(spec[1])
    if kind == "v":
        value = _tls.values[spec[1]]
        if isinstance(value, bool):
            return args.flag(spec[1])
        if isinstance(value, int):
            return args.integer(spec[1])
        return args.number(spec[1])
    if kind in ("l", "u"):
        items = [_rebuild(s, args) for s in spec[1]]
        return items if kind == "l" else tuple(items)
    if kind == "d":
        return {k: _rebuild(s, args) for k, s in zip(spec[1], spec[2])}
    return spec[1]


def _flatten_out(r, out):
    if isinstance(r, _core.Tensor):
        out.append(r)
        return ("t", len(out) - 1)
    if isinstance(r, (list, tuple)):
        return ("l" if isinstance(r, list) else "u", tuple(_flatten_out(e, out) for e in r))
    if isinstance(r, dict):
        return ("d", tuple(r.keys()), tuple(_flatten_out(v, out) for v in r.values()))
    raise TypeError(f"tensorjit.jit: the function returned a {type(r).__name__}; it must return tensors "
                    "(one, or a list, tuple or dict of them)")


def _unflatten(spec, outs):
    kind = spec[0]
    if kind == "t":
        return outs[spec[1]]
    if kind in ("l", "u"):
        items = [_unflatten(s, outs) for s in spec[1]]
        return items if kind == "l" else tuple(items)
    return {k: _unflatten(s, outs) for k, s in zip(spec[1], spec[2])}


class _Breaks(threading.local):
    """Where the function being traced read a tensor's value (a graph break)."""

    def __init__(self):
        self.sink = None


_breaks = _Breaks()


class JitFunction(_core._FastCalls):
    """A Python function compiled by tensorjit on each new kind of arguments.

    A call is _core._FastCalls's (python/src/calls.cpp): arguments of a
    structure seen before (positional and keyword) are checked, converted and
    run there, with no Python in between; anything else comes here, to _call."""

    def __init__(self, fn, dynamic=None, buckets=0, cache_limit=8, compile=True, name=None, freeze=(), grad=None, weights="f32", device="",
                 dims=(), borrow=False):
        super().__init__(_unflatten)
        # grad: (argnums, with_value): the function returns one scalar, a call
        # returns its gradients with respect to those positional arguments
        # (after the value, with_value); tensorjit.grad and value_and_grad.
        self._grad = grad
        if dynamic not in _POLICIES:
            raise ValueError("dynamic must be None (automatic), True (symbolic), False (static) or 'bucketed'")
        self._fn = fn
        self._name = name or getattr(fn, "__name__", "fn")
        self._policy = _POLICIES[dynamic]
        self._buckets = int(buckets)
        self._cache_limit = int(cache_limit)
        self._compile = bool(compile)
        if weights not in ("f32", "bf16", "int8", "i8"):
            raise ValueError(f"tensorjit.jit: weights='{weights}' is not a weight format (f32, bf16 or int8)")
        self._weights = weights
        devices = _core.device_names()  # "cpu", then the C++ registry's devices
        if device not in ("", *devices):
            listed = ", ".join(devices[:-1]) + " or " + devices[-1]
            raise ValueError(f"tensorjit.jit: device='{device}' is not a device ({listed})")
        self._device = device
        # dims: [tensor, axis, policy] marks for every call (mark_dynamic's, fixed: the torch backend's SymInt dims).
        self._dims = [list(d) for d in dims]
        self._by_structure = {}  # structure -> (C++ JIT, output structures by values)
        self._breaks = {}  # (file, line) -> count
        # freeze: arguments (by name or position) whose arrays are weights,
        # copied into the compilation; another array there is a new compilation.
        # borrow: they are read in place instead, the caller passing another
        # array object when one changes (the torch backend: version counters).
        self._borrow = bool(borrow)
        freeze = (freeze,) if isinstance(freeze, (str, int)) else tuple(freeze)
        self._freeze_pos, self._freeze_names = set(), set()
        params = list(inspect.signature(fn).parameters) if freeze else []
        for f in freeze:
            if isinstance(f, int):
                self._freeze_pos.add(f)
            elif f in params:
                self._freeze_pos.add(params.index(f))
                self._freeze_names.add(f)
            else:
                raise ValueError(f"tensorjit.jit: freeze names '{f}', which is not a parameter of {self._name}")
        functools.update_wrapper(self, fn)

    def _entry(self, spec, tensors):
        entry = self._by_structure.get(spec)
        if entry is not None:
            return entry
        grad_wrt, grad_spec = (self._grad_structure(spec) if self._grad else ([], None))
        if len(self._by_structure) >= 64:
            raise RuntimeError(f"tensorjit.jit({self._name}): 64 argument structures seen; "
                               "pass varying values as arrays or numbers, not in lists of changing length")
        dims = [list(d) for d in self._dims]
        for i, t in enumerate(tensors):
            try:
                marks = _marks.get(t, [])
            except TypeError:  # not weak-referenceable
                marks = []
            for axis, pol in marks + _marks_by_id.pop(id(t), []):
                dims.append([i, axis, pol])
        fn, breaks, borrow = self._fn, self._breaks, self._borrow

        def traced(args):
            _tls.values, _tls.frozen = _tls.call
            _tls.counter, _tls.borrow = itertools.count(), borrow
            try:
                pos, kw = _rebuild(spec, args)
            finally:
                _tls.values = _tls.frozen = None  # not held past the trace
            sink, _breaks.sink = _breaks.sink, breaks
            try:
                r = fn(*pos, **kw)
            finally:
                _breaks.sink = sink
            outs = []
            traced.spec = _flatten_out(r, outs)
            traced.count += 1
            return outs

        traced.spec, traced.count = None, 0
        jit = _core._JitFunction(self._name, self._policy, dims, self._buckets, self._cache_limit, self._compile, grad_wrt, self._weights, self._device)
        traced.grad_spec = grad_spec
        entry = (jit, {}, traced)  # the C++ JIT, the output structure of each of its entries, the traced function
        self._by_structure[spec] = entry
        return entry

    def _call(self, *args, **kwargs):
        """The slow path: a call the fast path did not take."""
        tensors, values = _Arrays(), []
        tensors.frozen = []
        # The positional arguments one by one (arrays first: the common case);
        # the structure is the same as _flatten((args, kwargs)) gives. `kinds`:
        # what the fast path checks of each (None: it cannot take this call).
        frozen_pos = self._freeze_pos
        parts, kinds = [], []
        for i, a in enumerate(args):
            t = type(a)
            if i in frozen_pos:
                parts.append(("f", _frozen_of(a, tensors.frozen)))
                kinds.append(_FROZEN if _fast_frozen(a) else None)
            elif t is _ndarray:
                tensors.append(a)
                parts.append(("t", len(tensors) - 1))
                kinds.append(_ARRAY)
            else:
                parts.append(_flatten(a, tensors, values))
                kinds.append(_fast_kind(a, t))
        if kwargs:
            for k, v in kwargs.items():
                t = type(v)
                if k in self._freeze_names:
                    kinds.append(_FROZEN if _fast_frozen(v) else None)
                else:
                    kinds.append(_ARRAY if t is _ndarray else _fast_kind(v, t) if type(k) is str else None)
            given = kwargs
            if self._freeze_names:
                kwargs = {k: _Frozen(v) if k in self._freeze_names else v for k, v in kwargs.items()}
            kw = _flatten(kwargs, tensors, values)
        else:
            given, kw = kwargs, _NO_KWARGS
        spec = ("u", (("u", tuple(parts)), kw))
        jit, out_specs, traced = self._entry(spec, tensors)
        traces = traced.count
        # This call's values and frozen arrays, for its trace: on this thread
        # (other threads call the same function), and not held past the call.
        outer, _tls.call = getattr(_tls, "call", None), (values, tensors.frozen)
        try:
            outs, entry = jit(traced, tensors, values)
        finally:
            _tls.call = outer
        if traced.count != traces:  # this call traced: its output structure
            out_spec = traced.spec
            if traced.grad_spec is not None:  # one scalar came back; the call returns (value,) gradients
                if out_spec != ("t", 0):
                    raise TypeError(f"tensorjit.grad({self._name}): the function must return one scalar array")
                out_spec = traced.grad_spec
            if entry >= 0:
                out_specs[entry] = out_spec
        else:
            out_spec = out_specs[entry]
        if entry >= 0 and None not in kinds:
            self._learn(args, given, kinds, jit, entry, out_spec, _form(out_spec))
        return _unflatten(out_spec, outs)

    def _grad_structure(self, spec):
        """The tensors (flattened indices) the gradient is taken with respect
        to, and the structure of the call's result: the value (with_value),
        then per argnum its gradients in the argument's own structure."""
        argnums, with_value = self._grad
        parts = spec[1][0][1]
        wrt = []

        def relabel(s):
            kind = s[0]
            if kind == "t":
                wrt.append(s[1])
                return ("t", len(wrt))  # output 0 is the value
            if kind in ("l", "u"):
                return (kind, tuple(relabel(x) for x in s[1]))
            if kind == "d":
                return ("d", s[1], tuple(relabel(x) for x in s[2]))
            what = "a Python number" if kind == "v" else "a frozen argument" if kind == "f" else repr(s[1])
            raise TypeError(f"tensorjit.grad({self._name}): cannot differentiate with respect to {what}; pass arrays")

        grads = []
        for a in argnums:
            if not -len(parts) <= a < len(parts):
                raise TypeError(f"tensorjit.grad({self._name}): argnum {a} of a call with {len(parts)} positional arguments")
            grads.append(relabel(parts[a]))
        g = grads[0] if len(grads) == 1 else ("u", tuple(grads))
        return wrt, (("u", (("t", 0), g)) if with_value else g)

    @property
    def stats(self):
        """Calls, hits, compilations, graph breaks ... summed over argument structures."""
        total = {}
        for jit, _, _ in self._by_structure.values():
            for k, v in jit.stats.items():
                total[k] = total.get(k, 0) + v
        return total

    def explain(self):
        lines = [f"tensorjit.jit({self._name}): {len(self._by_structure)} argument structure(s)"]
        for i, (spec, (jit, _, _)) in enumerate(self._by_structure.items()):
            lines.append(f"structure {i}: {_describe(spec)}")
            lines += _explanation_lines(jit.explanation())
        if self._breaks:
            lines.append("graph breaks (a tensor's value read while tracing):")
            for (file, line), n in sorted(self._breaks.items()):
                src = linecache.getline(file, line).strip()
                lines.append(f"  {file}:{line}: {src}  ({n} time{'s' if n != 1 else ''})")
        return "\n".join(lines) + "\n"


def _explanation_lines(x):
    """The C++ JIT's explanation (JitFunction::explanation) as text. Its graph
    breaks are the Python file and line, listed by explain(), not the
    binding's C++ source location."""
    lines = [f"jit '{x['name']}': {x['calls']} calls, {x['hits']} hits, {x['compilations']} compilations "
             f"({x['compile_seconds']:.2f} s), {x['eager_calls']} on the interpreter, cache limit {x['cache_limit']}"]
    if x["breaks_graph"]:
        lines.append(f"breaks the graph (reads tensor values): traced on every call; {x['graph_breaks']} breaks, "
                     f"{x['graphs_run']} graphs run, {x['distinct_graphs']} distinct graphs compiled")
    for e in x["entries"]:
        lines.append(f"entry {e['id']} (compiled at call {e['compiled_at']}):")
        lines += ["  " + g for g in e["guards"]]
    if x["history"]:
        lines.append("history:")
        lines += ["  " + h for h in x["history"]]
    if x["dropped_notes"]:
        lines.append(f"  ({x['dropped_notes']} later notes not kept)")
    return lines


def _describe(spec):
    kind = spec[0]
    if kind == "f":
        return "frozen " + _describe(spec[1])
    if kind == "a":
        return "weight"
    if kind == "t":
        return f"array{spec[1]}"
    if kind == "v":
        return f"value{spec[1]}"
    if kind in ("l", "u"):
        inner = ", ".join(_describe(s) for s in spec[1])
        return f"[{inner}]" if kind == "l" else f"({inner})"
    if kind == "d":
        return "{" + ", ".join(f"{k!r}: {_describe(s)}" for k, s in zip(spec[1], spec[2])) + "}"
    return repr(spec[1])


def _note_break():
    """Called where a proxy's value is read: records the user's file and line."""
    sink = _breaks.sink
    if sink is None:
        return
    frame = inspect.currentframe()
    here = __file__
    while frame is not None and (frame.f_code.co_filename == here or frame.f_code.co_filename.endswith("tensorjit/__init__.py")):
        frame = frame.f_back
    if frame is not None:
        key = (frame.f_code.co_filename, frame.f_lineno)
        sink[key] = sink.get(key, 0) + 1


def jit(fn=None, *, dynamic=None, buckets=0, cache_limit=8, compile=True, name=None, freeze=(), weights="f32", device=""):
    """Compile a Python function of arrays with tensorjit.

    dynamic: None (a dim is static until it shows a second size, then
    symbolic), True (every dim symbolic), False (a compilation per shape) or
    "bucketed" (sizes padded to `buckets`: 0 powers of two, k multiples of k).
    cache_limit: compiled entries before calls fall back to the interpreter
    (with a warning). freeze: arguments (names or positions) whose arrays are
    weights: copied into the compilation once, where the optimizer folds
    them; passing other arrays there compiles again (changing a frozen
    array in place is not seen). weights: how frozen matrix weights are
    stored, "f32", "bf16" or "int8" (a scale per output channel); the
    products read them converted and accumulate in f32. device: where the
    compiled code runs, "cpu", "opencl" or "cuda" ("": $TJ_DEVICE, else the
    CPU); a device that is not present is an error at the first call."""
    if fn is None:
        return lambda f: JitFunction(f, dynamic, buckets, cache_limit, compile, name, freeze, weights=weights, device=device)
    return JitFunction(fn, dynamic, buckets, cache_limit, compile, name, freeze, weights=weights, device=device)


def _grad(fn, argnums, with_value, options):
    if isinstance(fn, JitFunction):
        options = {"dynamic": {v: k for k, v in _POLICIES.items()}[fn._policy], "buckets": fn._buckets,
                   "cache_limit": fn._cache_limit, "compile": fn._compile, **options}
        fn = fn._fn
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(a, int) for a in nums):
        raise TypeError("tensorjit.grad: argnums must be an int or a tuple of ints")
    name = options.pop("name", None) or getattr(fn, "__name__", "fn")
    return JitFunction(fn, name=f"{'value_and_grad' if with_value else 'grad'}({name})", grad=(nums, with_value), **options)


def grad(fn, argnums=0, **options):
    """The gradient of `fn` (which returns one scalar array) with respect to
    its positional argument(s) `argnums`, as jax.grad: a function of the
    same arguments returning arrays shaped as those arguments (a dict of
    weights gives a dict of gradients). Reverse mode on tensorjit's IR,
    compiled with the forward; options as tensorjit.jit's."""
    return _grad(fn, argnums, False, options)


def value_and_grad(fn, argnums=0, **options):
    """(fn(*args), grad(fn, argnums)(*args)) from one compiled call, as
    jax.value_and_grad."""
    return _grad(fn, argnums, True, options)


def explain(f):
    """The entries of a jit function, their guards, each recompilation (with the
    guard that failed) and each graph break (with the file and line)."""
    if not isinstance(f, JitFunction):
        raise TypeError("tensorjit.explain takes a function made by tensorjit.jit")
    return f.explain()


def compile(fn, example_args, **options):
    """Ahead of time: compile `fn` for `example_args` now; the returned
    function runs it (and compiles again for other kinds of arguments)."""
    f = fn if isinstance(fn, JitFunction) else JitFunction(fn, **options)
    f(*example_args)
    return f
