// Whole-file reads and atomic writes, for the caches.
#pragma once

#include <xxhash.h>

#include <filesystem>
#include <string>

namespace tj {

// The file's bytes; *ok is false when it cannot be read.
std::string read_file(const std::filesystem::path& p, bool* ok);
// Writes `data` to `path` atomically: a unique temporary name, then rename.
// Throws tj::Error when it cannot.
void write_atomic(const std::filesystem::path& path, const std::string& data);
void write_atomic(const std::filesystem::path& path, const void* data, size_t size);

// A 128-bit hash as 32 hex digits (the caches' keys and sidecars).
std::string hex128(XXH128_hash_t h);
inline std::string hash_hex(const void* data, size_t size) { return hex128(XXH3_128bits(data, size)); }

}  // namespace tj
