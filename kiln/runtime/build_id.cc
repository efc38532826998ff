#include "kiln/runtime/build_id.h"

#include <elf.h>
#include <link.h>

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace kiln {
namespace {

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

// "libkiln_ir.so" of "/path/libkiln_ir.so".
std::string file_name(const char* path) {
  std::string p = path ? path : "";
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& kiln_build_ids() {
  // Never destroyed: background kernel builds read it during exit. The
  // libraries are all loaded by then: linked, or opened while they load
  // (the CPU kernels' ISA copy).
  using Ids = std::vector<std::pair<std::string, std::string>>;
  static const Ids* ids = new Ids([] {
    struct Search {
      uintptr_t self;  // an address in the object holding this code
      Ids found;
    } s{reinterpret_cast<uintptr_t>(&kiln_build_ids), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* s = static_cast<Search*>(data);
          std::string name = file_name(info->dlpi_name);
          bool kiln_library = name.starts_with("libkiln_") && name.ends_with(".so");
          if (kiln_library || contains(info, s->self))
            s->found.emplace_back(name.empty() ? "(executable)" : name, find_build_id(info));
          return 0;
        },
        &s);
    std::sort(s.found.begin(), s.found.end());
    s.found.erase(std::unique(s.found.begin(), s.found.end()), s.found.end());
    return s.found;
  }());
  return *ids;
}

const std::string& kiln_build_id() {
  static const std::string* id = new std::string([] {
    std::string all;
    for (const auto& [file, build] : kiln_build_ids()) all += file + "=" + build + ";";
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(all.data(), all.size(), 0)));
    return std::string(hex);
  }());
  return *id;
}

}  // namespace kiln
