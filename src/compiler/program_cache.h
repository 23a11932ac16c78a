// The program cache: what the passes make of a graph and its weights, kept
// on disk so that a warm start skips them (and, through the kernel cache,
// the compiler).
//
// The key hashes the compiler's identity, the traced graph's text, the compile options and every
// param's name, type and bytes (XXH3-128 over the data: a changed weight is
// another entry). An entry holds the optimized graph as IR text, with each
// constant of more than one element turned into a param named tj.const.N,
// and those constants' bytes, in their own dtypes, in one file mapped into
// memory on a hit (the executable reads the weights from the mapping: no
// copy), named by its content hash so that programs with the same prepared
// constants (a model at several shapes) share it. A sidecar with both
// files' hashes is written last; an entry whose files do not match it is
// rebuilt. A data file is hashed on the hit that first meets it, then
// trusted while its fstat identity (inode, size, modification and status
// change times) is the one recorded after that hash, in <hash>.seen. The
// folder is held under TJ_CACHE_MAX_MB (default 4096): after a store the
// least recently used files go (a hit touches its entry's).
//
// Cold and warm compilations run fusion and emission on the same graph, read
// back from the same text, so the generated source (and its library in the
// kernel cache) is the same.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "compiler/options.h"

namespace tj {

struct PreparedProgram {
  Graph graph;  // optimized; its large constants are params tj.const.N
  std::shared_ptr<const void> storage;                      // their bytes (a mapping or a heap block)
  std::unordered_map<std::string, const void*> constants;  // param name -> its bytes in storage
};

std::string program_key(const Graph& traced, const Bindings& params, const CompileOptions& o);
// The entry for `key`, or nothing (absent, incomplete or corrupt).
std::optional<PreparedProgram> load_program(const std::string& key);
// Turns the optimized graph's large constants into tj.const.N params and
// writes the entry (if the cache folder cannot be written: one log line
// under TJ_LOG=compile, and the program is used from memory).
PreparedProgram store_program(const std::string& key, const Graph& optimized);

}  // namespace tj
