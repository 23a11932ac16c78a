// fuzz_safetensors: bytes in as a safetensors file, every tensor read.
//
// bytes -> a file -> SafetensorsFile (the header checked whole) -> read()
// of every tensor; a file that reads is written back with
// write_safetensors and read again, which must give the same tensors. A
// tj::Error anywhere is an accepted outcome (bad input, clear message); any
// other exception, a crash, a sanitizer report or a round-trip mismatch is a
// finding (abort).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "tensorjit/error.h"
#include "tensorjit/safetensors.h"

namespace {

constexpr size_t kMaxInputBytes = 1 << 20;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", what.c_str());
  std::abort();
}

std::string temp_path(const char* name) {
  return "/tmp/tj_fuzz_safetensors_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInputBytes) return 0;
  const std::string in = temp_path("in.safetensors"), back = temp_path("back.safetensors");
  {
    std::ofstream f(in, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    tj::SafetensorsFile file(in);
    auto all = file.read_all();
    for (const auto& t : file.tensors())
      if (file.bytes(t.name).size() != all.at(t.name).nbytes()) finding("bytes() and read() disagree on '" + t.name + "'");
    tj::write_safetensors(back, all, file.metadata());
    tj::SafetensorsFile again(back);
    auto all2 = again.read_all();
    if (all2.size() != all.size() || again.metadata() != file.metadata()) finding("the round trip changed the tensor list or metadata");
    for (const auto& [name, a] : all) {
      const tj::NDArray& b = all2.at(name);
      if (a.dtype() != b.dtype() || a.shape() != b.shape() || (a.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0))
        finding("the round trip changed tensor '" + name + "'");
    }
  } catch (const tj::Error&) {
    // a clear error: accepted
  } catch (const std::exception& e) {
    finding(std::string("not a tj::Error: ") + e.what());
  }
  std::remove(in.c_str());
  std::remove(back.c_str());
  return 0;
}
