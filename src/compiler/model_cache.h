// Warm starts of an ONNX model file that skip its import: parsing 90 MB of
// protobuf and copying the initializers out took 150-190 ms of a 0.34-0.52 s
// warm `tjc run` of MiniLM-L6, where the program cache hit took 25 ms.
//
// An entry, $TJ_CACHE_DIR/models/<key>.json, holds the traced graph's text
// (its params declared as w0, w1, ... in order, no values), the outputs'
// ONNX names and the key of the program the first compilation stored. The key hashes this tensorjit's
// identity, the file's absolute path and its fstat identity (device, inode,
// size, modification and status change times to the nanosecond): a model
// file that is written, truncated or replaced is another key, and the status
// change time cannot be set back. Models with external data are not kept
// (their other files would need the same care). A hit whose program the
// cache no longer holds, or whose entry does not read back, is a miss.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tj {

struct ModelEntry {
  Graph graph;                            // as traced from the file; params renamed w0, w1, ... (no values)
  std::vector<std::string> output_names;  // the graph outputs' ONNX names, in order
  std::string program_key;                // compile_prepared()'s key
};

// The entry for the model file at `path`, or nothing. `variant` names what
// else the program depends on ("" by default; "weights bf16"): each is its own entry.
std::optional<ModelEntry> load_model_entry(const std::string& path, const std::string& variant = "");
// Remembers that `path`, as it is now, traced to `graph` and compiled to the
// program under `program_key`. Nothing when the cache folder cannot be
// written (one line under TJ_LOG=compile).
void store_model_entry(const std::string& path, const Graph& graph, const std::vector<std::string>& output_names,
                       const std::string& program_key, const std::string& variant = "");

}  // namespace tj
