"""Writes the ONNX backend node test cases out as files, in the ONNX
repository's layout, for `tjc onnx-conformance`.

The onnx wheel carries the cases as generators (onnx.backend.test.case.node);
each becomes OUT/<case>/model.onnx and OUT/<case>/test_data_set_N/input_K.pb,
output_K.pb (TensorProto, SequenceProto or OptionalProto as the graph's
types say). OUT/manifest.json lists every case with the op it tests and the
suite's tolerances: [{"name", "op", "rtol", "atol"}].

Usage: python onnx_testdata.py OUT
"""
import json
import os
import shutil
import sys
import warnings

import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node


def proto_of(value, vtype, name):
    if isinstance(value, onnx.TensorProto):  # cases that build their protos themselves (cast to float8)
        value.name = name
        return value
    if vtype.HasField("sequence_type"):
        return numpy_helper.from_list(value, name)
    if vtype.HasField("optional_type"):
        return numpy_helper.from_optional(value, name)
    if vtype.HasField("map_type"):
        return numpy_helper.from_dict(value, name)
    return numpy_helper.from_array(value, name)


def main(out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own overflow warnings
        cases = node.collect_testcases()
    os.makedirs(out, exist_ok=True)
    # The op a case tests: its node's type; an "_expanded" case (the op's
    # function body) counts for the op of the case it expands.
    op_of = {}
    for c in cases:
        if not c.name.endswith("_expanded") and len(c.model.graph.node) >= 1:
            op_of[c.name] = c.model.graph.node[0].op_type
    manifest = []
    for c in cases:
        base = c.name[: -len("_expanded")] if c.name.endswith("_expanded") else c.name
        op = op_of.get(base) or (c.model.graph.node[0].op_type if c.model.graph.node else "?")
        d = os.path.join(out, c.name)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(c.model.SerializeToString())
        g = c.model.graph
        for i, (inputs, outputs) in enumerate(c.data_sets):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds)
            for kind, values, infos in (("input", inputs, g.input), ("output", outputs, g.output)):
                for k, v in enumerate(values):
                    with open(os.path.join(ds, f"{kind}_{k}.pb"), "wb") as f:
                        f.write(proto_of(v, infos[k].type, infos[k].name).SerializeToString())
        manifest.append({"name": c.name, "op": op, "rtol": c.rtol, "atol": c.atol, "expanded": c.name.endswith("_expanded")})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"onnx": onnx.__version__, "cases": manifest}, f, indent=0)
    print(f"{len(manifest)} cases (onnx {onnx.__version__}) in {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
