"""ONNX models from Python: tensorjit.onnx.load(path) compiles a model file
(or takes its program from the cache when the file was compiled before) and
returns a callable. A model whose shapes, axes or counts arrive as inputs
(a Reshape's shape, Slice's starts, TopK's k) is compiled per value of
those inputs (`specialized` names them), as tensorjit.jit specializes on
Python numbers."""

from . import _core


class OnnxModel:
    """A compiled ONNX model: call it with its inputs by name (or in order);
    it returns the outputs in order (output_names names them)."""

    def __init__(self, path, weights="f32", device=""):
        self._f = _core._OnnxFunction(str(path), weights, device)
        self.input_names = list(self._f.input_names)
        self.output_names = list(self._f.output_names)
        self.imported = self._f.imported

    @property
    def specialized(self):
        """The inputs the model is compiled per value of (empty: one program)."""
        return list(self._f.specialized)

    @property
    def programs(self):
        """How many programs have been compiled (one per value of the specialized inputs)."""
        return self._f.programs

    def __call__(self, *args, **kwargs):
        if len(args) > len(self.input_names):
            raise TypeError(f"the model takes {len(self.input_names)} inputs ({', '.join(self.input_names)}), got {len(args)}")
        inputs = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k in inputs:
                raise TypeError(f"input '{k}' given twice")
            inputs[k] = v
        missing = [n for n in self.input_names if n not in inputs]
        if missing:
            raise TypeError(f"missing input(s): {', '.join(missing)}")
        return self._f.run(inputs)

    def __repr__(self):
        return f"tensorjit.onnx.OnnxModel(inputs={self.input_names}, outputs={self.output_names})"


def load(path, weights="f32", device=""):
    """The ONNX model at `path`, compiled (docs/onnx.md). weights: how the
    matrix products' weights are stored, "f32", "bf16" or "int8" (a scale per
    output channel); they are read converted, accumulating in f32. device:
    where it runs, "cpu", "opencl" or "cuda" ("": $TJ_DEVICE, else the CPU)."""
    return OnnxModel(path, weights, device)
