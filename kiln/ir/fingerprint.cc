#include "kiln/ir/fingerprint.h"

#include <xxhash.h>

#include <cstdio>

namespace kiln::ir {
namespace {

class Hasher {
 public:
  Hasher() : s_(XXH64_createState()) { XXH64_reset(s_, 0); }
  ~Hasher() { XXH64_freeState(s_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void bytes(const void* p, size_t n) { XXH64_update(s_, p, n); }
  template <class T> void pod(const T& v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    pod(s.size());
    bytes(s.data(), s.size());
  }
  uint64_t digest() const { return XXH64_digest(s_); }

 private:
  XXH64_state_t* s_;
};

void hash_attr(Hasher& h, const AttrValue& v) {
  h.pod(v.index());
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) h.str(x);
        else if constexpr (std::is_same_v<T, IntList>) {
          h.pod(x.size());
          h.bytes(x.data(), x.size() * sizeof(int64_t));
        } else h.pod(x);
      },
      v);
}

}  // namespace

Fingerprint fingerprint(const Graph& g, const CompileOptions& options) {
  Hasher structure, sizes, opts;
  auto type = [&](ValueId v) {
    const TypeInfo& t = g.type(v);
    structure.pod(t.dtype);
    structure.pod(t.shape.size());
    sizes.pod(t.shape.size());
    sizes.bytes(t.shape.begin(), sizeof(int64_t) * t.shape.size());
  };
  structure.pod(g.inputs().size());
  for (ValueId v : g.inputs()) type(v);
  for (const Node& n : g.nodes()) {
    structure.str(n.op->name);
    structure.pod(n.inputs.size());
    for (ValueId v : n.inputs) structure.pod(v);
    for (const auto& [k, v] : n.attrs.items()) {
      structure.str(k);
      hash_attr(structure, v);
    }
    for (ValueId v : n.outputs) type(v);
  }
  structure.pod(g.outputs().size());
  for (ValueId v : g.outputs()) structure.pod(v);
  opts.str(options.backend);
  opts.str(options.flags);
  opts.str(KILN_VERSION);
  return {structure.digest(), sizes.digest(), opts.digest()};
}

std::string to_string(const Fingerprint& f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%016llx%016llx%016llx", (unsigned long long)f.shapeless,
                (unsigned long long)f.dims, (unsigned long long)f.options);
  return buf;
}

}  // namespace kiln::ir
