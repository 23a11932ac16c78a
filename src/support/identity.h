// Which tensorjit made a cached file: the GNU build-id of the binary
// tensorjit is linked into (or that file's hash), once per process. An
// optimized graph, a tuning choice or a model's compilation depends on
// tensorjit's code, so a rebuilt tensorjit must not reuse what an older one
// made. Empty: unknown, and the caches then keep nothing.
#pragma once

#include <string>

namespace tj {

const std::string& build_identity();

}  // namespace tj
