#include "support/identity.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

#include "support/files.h"

namespace tj {

namespace {

// The GNU build-id of the loaded object (executable or shared library) that
// holds `addr`, as hex; or, for an object linked without one, the hash of
// its file (/proc/self/exe for the executable itself); empty when neither
// can be had.
std::string object_identity(const void* addr) {
  struct Search {
    uintptr_t addr;
    std::string id;
  } search{reinterpret_cast<uintptr_t>(addr), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        bool holds = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
          holds |= ph.p_type == PT_LOAD && s->addr >= lo && s->addr - lo < ph.p_memsz;
        }
        if (!holds) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const size_t align = ph.p_align == 8 ? 8 : 4;
          auto up = [&](size_t n) { return (n + align - 1) / align * align; };
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (static_cast<size_t>(end - p) >= sizeof(ElfW(Nhdr))) {
            ElfW(Nhdr) nh;
            std::memcpy(&nh, p, sizeof nh);
            const char* name = p + sizeof nh;
            if (static_cast<size_t>(end - name) < up(nh.n_namesz)) break;
            const char* desc = name + up(nh.n_namesz);
            if (static_cast<size_t>(end - desc) < nh.n_descsz) break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              s->id = "build-id " + hash_hex(desc, nh.n_descsz);
              return 1;
            }
            if (static_cast<size_t>(end - desc) < up(nh.n_descsz)) break;
            p = desc + up(nh.n_descsz);
          }
        }
        // No build-id: the file's bytes (the executable's own name may be
        // relative, or no name at all: /proc/self/exe is the file).
        std::string path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
        bool ok = false;
        std::string bytes = read_file(path, &ok);
        if (ok && !bytes.empty()) s->id = "file " + hash_hex(bytes.data(), bytes.size());
        return 1;
      },
      &search);
  return search.id;
}

}  // namespace

const std::string& build_identity() {
  static const std::string id = object_identity(reinterpret_cast<const void*>(&object_identity));
  return id;
}

}  // namespace tj
