#include "kiln/runtime/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace kiln {
namespace {

struct Search {
  uintptr_t address;  // an address inside libkiln
  std::string id;
};

bool contains(const dl_phdr_info* info, uintptr_t address) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && address >= start && address < start + ph.p_memsz) return true;
  }
  return false;
}

// The NT_GNU_BUILD_ID note among the object's PT_NOTE segments, in hex.
std::string find_build_id(const dl_phdr_info* info) {
  constexpr auto align4 = [](size_t n) { return (n + 3) & ~size_t{3}; };
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof *note;
      const auto* desc = reinterpret_cast<const unsigned char*>(name + align4(note->n_namesz));
      if (reinterpret_cast<const char*>(desc) + note->n_descsz > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        std::string hex;
        char byte[3];
        for (size_t k = 0; k < note->n_descsz; ++k) {
          std::snprintf(byte, sizeof byte, "%02x", desc[k]);
          hex += byte;
        }
        return hex;
      }
      p = reinterpret_cast<const char*>(desc) + align4(note->n_descsz);
    }
  }
  return "";
}

}  // namespace

const std::string& kiln_build_id() {
  // Never destroyed: background kernel builds read it during exit.
  static const std::string* id = new std::string([] {
    Search s{reinterpret_cast<uintptr_t>(&kiln_build_id), ""};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* s = static_cast<Search*>(data);
          if (!contains(info, s->address)) return 0;
          s->id = find_build_id(info);
          return 1;
        },
        &s);
    return s.id;
  }());
  return *id;
}

}  // namespace kiln
