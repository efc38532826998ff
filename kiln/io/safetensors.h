// safetensors files (Hugging Face's weight format): an 8-byte little-endian
// header length N, N bytes of JSON mapping each tensor name to its dtype,
// shape and [begin, end) byte range in the data section that follows, and an
// optional "__metadata__" object of strings.
//
// The reader memory-maps the file and validates the whole header before any
// tensor is read, so a corrupt or hostile file is a kiln::Error naming the
// file (and the tensor), never a crash or a read past the mapping: the length
// must fit in the file and stay under 100 MB, the JSON must parse with no
// duplicate names, every entry needs a known dtype, a shape of at most 8
// non-negative dims, and offsets inside the data section whose size equals
// dtype size x elements (computed without overflow); ranges may not overlap
// and must cover the data section without holes, as the format requires.
//
// Tensors are copied out of the mapping into kiln storage by get(): kiln's
// Storage comes from the caching allocator and kernels may write to it, so a
// read-only file mapping cannot back it. bytes() gives the mapped data itself
// for callers that only read (no copy). As with any mapping, a file that
// another process truncates while it is mapped faults on access (SIGBUS):
// replace weight files by rename (as save_safetensors does), never in place.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln {

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// "F32", "BF16", "F16", "F64", "I32", "I64", "BOOL".
const char* safetensors_dtype_name(DType t);

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws kiln::Error on any defect.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) = delete;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Entries in data order (ascending offsets).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return index_.contains(name); }
  // Throws kiln::Error naming the file when there is no such tensor.
  const SafetensorsEntry& entry(const std::string& name) const;
  // The tensor's bytes inside the mapping (valid while this object lives).
  std::span<const std::byte> bytes(const std::string& name) const;
  // A fresh contiguous tensor in the file's dtype holding a copy of the data.
  Tensor get(const std::string& name, Device device = kCPU) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  const std::byte* map_ = nullptr;  // the whole file
  size_t map_size_ = 0;
  const std::byte* data_ = nullptr;  // the data section, inside the mapping
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (in this order; names unique, not "__metadata__") to
// `path` atomically (AtomicFile). The header is padded with spaces to a
// multiple of 8 bytes so that the data section is 8-byte aligned.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A tensor's elements copied to host memory, dense in row-major order: what
// a file written on another thread holds while the tensors go on changing
// (an asynchronous checkpoint). Writing it touches no device.
struct HostTensor {
  DType dtype = DType::f32;
  Shape shape;
  std::shared_ptr<char[]> data;  // shape.numel() * itemsize(dtype) bytes
  size_t nbytes() const { return size_t(shape.numel()) * itemsize(dtype); }
};
using NamedHostTensors = std::vector<std::pair<std::string, HostTensor>>;

// Copies every tensor to host memory, once the device work writing them is
// done; into `reuse`'s buffers where its tensor at the same place has the
// same name, dtype and shape and no one else holds it (a second copy of
// the same tensors then allocates, and faults in, no new memory).
NamedHostTensors copy_to_host(const NamedTensors& tensors, NamedHostTensors reuse = {});
// The same file save_safetensors writes of the tensors copied.
void save_safetensors(const std::string& path, const NamedHostTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace kiln
