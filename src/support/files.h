// Whole-file reads and atomic writes, for the caches.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tj {

// The file's bytes; *ok is false when it cannot be read.
std::string read_file(const std::filesystem::path& p, bool* ok);
// A name beside `path` that no other writer uses (this process's id, the
// clock and a count): where a file is written before it is renamed into place.
std::filesystem::path temporary_beside(const std::filesystem::path& path);
// Writes `data` to `path` atomically: a unique temporary name, then rename.
// Throws tj::Error when it cannot.
void write_atomic(const std::filesystem::path& path, const std::string& data);
void write_atomic(const std::filesystem::path& path, const void* data, size_t size);

// The identity of the open file `fd` as fstat gives it: device, inode, size,
// and the times of its last modification and status change to the
// nanosecond. A write, a truncation or a replacement changes it, and the
// status change time cannot be set back, even by a program that puts the
// modification time back. Empty when fstat fails.
std::string file_identity(int fd);

// The caches' size limit per folder: TJ_CACHE_MAX_MB, default 4096 MB. A
// value that is not a whole number of MB is reported through `note` and the
// default used.
uintmax_t cache_size_limit(const std::function<void(const std::string&)>& note);
// Marks files as used now (their modification time): the caches' LRU order.
void touch_files(const std::vector<std::filesystem::path>& files);
// Removes the least recently used regular files of `dir` until its files
// add up to at most `limit` bytes, never those in `keep`; each removal is
// reported through `note`. Files another process removes first are skipped.
void evict_least_recent(const std::filesystem::path& dir, uintmax_t limit, const std::vector<std::filesystem::path>& keep,
                        const std::function<void(const std::string&)>& note);

// A 128-bit hash as 32 hex digits (the caches' keys and sidecars).
std::string hex128(XXH128_hash_t h);
inline std::string hash_hex(const void* data, size_t size) { return hex128(XXH3_128bits(data, size)); }

}  // namespace tj
