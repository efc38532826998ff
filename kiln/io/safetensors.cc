#include "kiln/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "kiln/io/json_brief.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; kiln reads it in place");

namespace {

using json = nlohmann::json;

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"F32", DType::f32}, {"BF16", DType::bf16}, {"F16", DType::f16}, {"F64", DType::f64},
    {"I32", DType::i32}, {"I64", DType::i64},   {"BOOL", DType::b8},
};
// Valid in the format, but kiln has no such dtype.
constexpr const char* kForeignDTypes[] = {"I8",      "U8",      "I16",     "U16",     "U32",
                                          "U64",     "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                          "F6_E3M2", "F4",      "C64"};

std::string supported_list() {
  std::string s;
  for (const auto& d : kDTypeNames) s += cat(s.empty() ? "" : ", ", d.name);
  return s;
}

// The first time a JSON object repeats a key (nlohmann keeps the last one
// silently, which would hide a conflicting second entry).
class DuplicateKeys {
 public:
  bool operator()(int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_.pop_back();
    } else if (event == json::parse_event_t::key && !open_.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  }
  std::string duplicate;

 private:
  std::vector<std::set<std::string>> open_;
};

uint64_t read_le64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Parses one header entry; `where` names the file and tensor for errors.
SafetensorsEntry parse_entry(const std::string& name, const json& e, uint64_t data_size,
                             const std::string& where) {
  KILN_CHECK(e.is_object(), where,
             ": the header entry must be an object with dtype, shape and "
             "data_offsets, got ",
             e.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    KILN_CHECK(e.contains(key), where, ": the header entry has no '", key, "'");
  }
  SafetensorsEntry out;
  out.name = name;

  const json& dt = e.at("dtype");
  KILN_CHECK(dt.is_string(), where, ": 'dtype' must be a string, got ", json_brief(dt));
  const std::string& ds = dt.get_ref<const std::string&>();
  const DTypeName* found = nullptr;
  for (const auto& d : kDTypeNames)
    if (ds == d.name) found = &d;
  if (!found) {
    bool foreign = std::find_if(std::begin(kForeignDTypes), std::end(kForeignDTypes),
                                [&](const char* f) { return ds == f; }) != std::end(kForeignDTypes);
    fail(where, ": ", foreign ? "unsupported" : "unknown", " dtype '", ds, "'; kiln reads ",
         supported_list());
  }
  out.dtype = found->dtype;

  const json& sh = e.at("shape");
  KILN_CHECK(sh.is_array(), where, ": 'shape' must be an array of sizes, got ", json_brief(sh));
  KILN_CHECK(sh.size() <= size_t(kMaxRank), where, ": shape ", json_brief(sh), " has rank ",
             sh.size(), "; kiln supports at most ", kMaxRank);
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : sh) {
    KILN_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(INT64_MAX), where,
               ": shape ", json_brief(sh), " must hold non-negative integers");
    overflow |= __builtin_mul_overflow(numel, d.get<uint64_t>(), &numel);
    out.shape.push_back(d.get<int64_t>());
  }
  uint64_t expected = 0;
  overflow |= __builtin_mul_overflow(numel, uint64_t(itemsize(out.dtype)), &expected);
  KILN_CHECK(!overflow, where, ": shape ", json_brief(sh),
             " is too large (its byte size overflows)");

  const json& off = e.at("data_offsets");
  KILN_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                 off[1].is_number_unsigned(),
             where, ": 'data_offsets' must be [begin, end] of non-negative integers, got ",
             json_brief(off));
  out.begin = off[0].get<uint64_t>();
  out.end = off[1].get<uint64_t>();
  KILN_CHECK(out.begin <= out.end, where, ": data_offsets [", out.begin, ", ", out.end,
             "] end before they begin");
  KILN_CHECK(out.end <= data_size, where, ": data_offsets [", out.begin, ", ", out.end,
             "] extend past the end of the data section (", data_size,
             " bytes): the file is truncated or the header is wrong");
  KILN_CHECK(out.nbytes() == expected, where, ": data_offsets [", out.begin, ", ", out.end,
             "] hold ", out.nbytes(), " bytes but ", ds, " of shape ", json_brief(sh), " needs ",
             expected);
  return out;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == t) return d.name;
  fail("safetensors: no name for dtype ", dtype_name(t));
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "cannot open safetensors file '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("safetensors file '", path, "' is not a regular file");
  }
  size_t size = size_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail("safetensors file '", path, "' is truncated: ", size,
         " bytes, fewer than the 8-byte header length");
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);  // the mapping keeps the file open
  KILN_CHECK(m != MAP_FAILED, "cannot map safetensors file '", path,
             "': ", std::strerror(map_errno));
  map_ = static_cast<const std::byte*>(m);
  map_size_ = size;
  try {
    uint64_t header_len = read_le64(map_);
    KILN_CHECK(header_len <= size - 8, "safetensors file '", path, "': the header length ",
               header_len, " runs past the end of the file (", size,
               " bytes): the file is truncated or not safetensors");
    KILN_CHECK(header_len < kSafetensorsMaxHeaderBytes, "safetensors file '", path,
               "': the header length ", header_len, " exceeds the limit of ",
               kSafetensorsMaxHeaderBytes, " bytes");
    const char* h = reinterpret_cast<const char*>(map_ + 8);
    KILN_CHECK(header_len > 0 && h[0] == '{', "safetensors file '", path,
               "': the header must be a JSON object starting with '{'");
    DuplicateKeys dups;
    json header;
    try {
      header = json::parse(h, h + header_len, std::ref(dups));
    } catch (const json::exception& e) {
      fail("safetensors file '", path, "': the header is not valid JSON: ", e.what());
    }
    KILN_CHECK(header.is_object(), "safetensors file '", path,
               "': the header is not a JSON object");
    KILN_CHECK(dups.duplicate.empty(), "safetensors file '", path, "': the header repeats key '",
               dups.duplicate, "'");

    data_ = map_ + 8 + header_len;
    uint64_t data_size = size - 8 - header_len;
    for (const auto& [name, e] : header.items()) {
      if (name == "__metadata__") {
        KILN_CHECK(e.is_object(), "safetensors file '", path,
                   "': __metadata__ must be an object of strings");
        for (const auto& [k, v] : e.items()) {
          KILN_CHECK(v.is_string(), "safetensors file '", path, "': __metadata__ value of '", k,
                     "' must be a string, got ", json_brief(v));
          metadata_[k] = v.get<std::string>();
        }
        continue;
      }
      entries_.push_back(parse_entry(name, e, data_size,
                                     cat("safetensors file '", path, "', tensor '", name, "'")));
    }

    // Sorted by range, each tensor must start where the previous one ended:
    // no overlap (two names for the same bytes) and no unindexed bytes.
    std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    uint64_t at = 0;
    const SafetensorsEntry* prev = nullptr;
    for (const auto& e : entries_) {
      KILN_CHECK(e.begin >= at, "safetensors file '", path, "', tensor '", e.name, "': its bytes [",
                 e.begin, ", ", e.end, ") overlap those of tensor '", prev ? prev->name : "", "' [",
                 prev ? prev->begin : 0, ", ", at, ")");
      KILN_CHECK(e.begin == at, "safetensors file '", path, "', tensor '", e.name, "': bytes [", at,
                 ", ", e.begin, ") before it belong to no tensor");
      at = e.end;
      prev = &e;
    }
    KILN_CHECK(at == data_size, "safetensors file '", path, "': the data section has ", data_size,
               " bytes but the tensors cover only ", at);
    for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
  } catch (...) {
    ::munmap(const_cast<std::byte*>(map_), map_size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<std::byte*>(map_), map_size_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_size_(std::exchange(o.map_size_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      entries_(std::move(o.entries_)),
      index_(std::move(o.index_)),
      metadata_(std::move(o.metadata_)) {}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  KILN_CHECK(it != index_.end(), "safetensors file '", path_, "' has no tensor named '", name,
             "' (it holds ", entries_.size(), " tensors)");
  return entries_[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  return {data_ + e.begin, size_t(e.nbytes())};
}

Tensor SafetensorsFile::get(const std::string& name, Device device) const {
  const SafetensorsEntry& e = entry(name);
  std::span<const std::byte> b = bytes(name);
  if (e.dtype == DType::b8) {
    // kiln's bool kernels assume 0 or 1.
    for (size_t i = 0; i < b.size(); ++i) {
      KILN_CHECK(uint8_t(b[i]) <= 1, "safetensors file '", path_, "', tensor '", name,
                 "': BOOL element ", i, " is ", int(uint8_t(b[i])), ", not 0 or 1");
    }
  }
  return from_host(b.data(), e.dtype, e.shape, device);
}

namespace {

// A tensor as the writer sees it: its header fields, and what writes its bytes.
struct Outgoing {
  const std::string& name;
  DType dtype;
  Shape shape;
  uint64_t bytes;
  std::function<void(AtomicFile&)> write;
};

void write_safetensors(const std::string& path, const std::vector<Outgoing>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const Outgoing& t : tensors) {
    KILN_CHECK(!t.name.empty() && t.name != "__metadata__", "save_safetensors '", path,
               "': invalid tensor name '", t.name, "'");
    KILN_CHECK(!header.contains(t.name), "save_safetensors '", path, "': tensor name '", t.name,
               "' appears twice");
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape.vec()},
                      {"data_offsets", {at, at + t.bytes}}};
    at += t.bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t len = h.size();

  AtomicFile file(path);
  file.write(&len, 8);
  file.write(h);
  for (const Outgoing& t : tensors)
    if (t.bytes) t.write(file);
  file.commit();
}

// A dense tensor's bytes in host memory, once written: its own storage on
// the CPU; for a device's, copied into `scratch` (nbytes of it).
const char* host_bytes(const Tensor& c, char* scratch) {
  synchronize(c.device());
  const TensorImpl& i = c.impl();
  const char* src = static_cast<const char*>(i.storage->data) + i.offset * itemsize(i.dtype);
  if (c.device().kind == DeviceKind::cpu) return src;
  backend(c.device()).copy_to_host(scratch, src, size_t(c.numel()) * itemsize(c.dtype()),
                                   c.device().index);
  synchronize(c.device());
  return scratch;
}

// The tensor made dense and materialized, or an error naming it.
Tensor dense(const std::string& path, const std::string& name, const Tensor& t) {
  KILN_CHECK(t.defined(), "save_safetensors '", path, "': tensor '", name, "' is undefined");
  Tensor c = t.contiguous();
  ensure_materialized(c);
  return c;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Outgoing> out;
  for (const auto& [name, t] : tensors) {
    Tensor c = dense(path, name, t);
    const uint64_t n = uint64_t(c.numel()) * itemsize(c.dtype());
    out.push_back({name, c.dtype(), c.shape(), n, [c, n](AtomicFile& f) {
                     std::vector<char> scratch(c.device().kind == DeviceKind::cpu ? 0 : n);
                     f.write(host_bytes(c, scratch.data()), n);
                   }});
  }
  write_safetensors(path, out, metadata);
}

NamedHostTensors copy_to_host(const NamedTensors& tensors, NamedHostTensors reuse) {
  NamedHostTensors out;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const auto& [name, t] = tensors[k];
    Tensor c = dense("(a host copy)", name, t);
    HostTensor h{c.dtype(), c.shape(), nullptr};
    if (k < reuse.size() && reuse[k].first == name && reuse[k].second.dtype == h.dtype &&
        reuse[k].second.shape == h.shape && reuse[k].second.data.use_count() == 1)
      h.data = std::move(reuse[k].second.data);
    else
      h.data = std::make_shared_for_overwrite<char[]>(std::max<size_t>(h.nbytes(), 1));
    if (h.nbytes()) {
      const char* src = host_bytes(c, h.data.get());
      if (src != h.data.get()) std::memcpy(h.data.get(), src, h.nbytes());
    }
    out.emplace_back(name, std::move(h));
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedHostTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Outgoing> out;
  for (const auto& [name, t] : tensors)
    out.push_back({name, t.dtype, t.shape, t.nbytes(),
                   [&t](AtomicFile& f) { f.write(t.data.get(), t.nbytes()); }});
  write_safetensors(path, out, metadata);
}

}  // namespace kiln
