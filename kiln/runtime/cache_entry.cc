#include "kiln/runtime/cache_entry.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/runtime/build_id.h"

namespace kiln {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'C', 'E', '\0'};
constexpr uint32_t kFormatVersion = 2;  // bumped whenever the layout changes
// Bounds a header's size so a damaged length field cannot ask for gigabytes.
constexpr uint64_t kMaxHeader = 1 << 16;

class Writer {
 public:
  template <class T> void pod(const T& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(std::string_view s) {
    pod(static_cast<uint32_t>(s.size()));
    out.append(s);
  }
  std::string out;
};

// Reads fields in order; any read past the end sets `short_` and yields zeros.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <class T> T pod() {
    T v{};
    if (pos_ + sizeof v > b_.size()) {
      short_ = true;
      return v;
    }
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str() {
    auto n = pod<uint32_t>();
    if (short_ || pos_ + n > b_.size()) {
      short_ = true;
      return {};
    }
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  void skip(size_t n) {
    if (pos_ + n > b_.size()) short_ = true;
    pos_ = std::min(pos_ + n, b_.size());
  }
  size_t pos() const { return pos_; }
  bool short_read() const { return short_; }

 private:
  std::string_view b_;
  size_t pos_ = 0;
  bool short_ = false;
};

}  // namespace

EntryIdentity build_identity() {
#if defined(__clang__)
  const char* compiler = "clang " __VERSION__;
#elif defined(__GNUC__)
  const char* compiler = "gcc " __VERSION__;
#else
  const char* compiler = __VERSION__;
#endif
  return {KILN_VERSION, compiler, kiln_build_id()};
}

std::string encode_entry(const CacheKey& key, const EntryIdentity& id, std::string_view payload) {
  Writer w;
  w.out.append(kMagic, sizeof kMagic);
  w.pod(kFormatVersion);
  w.pod(uint32_t{0});  // header size, filled in below
  w.pod(key.fingerprint.shapeless);
  w.pod(key.fingerprint.dims);
  w.pod(key.fingerprint.options);
  w.pod(static_cast<uint64_t>(payload.size()));
  w.pod(static_cast<uint64_t>(XXH64(payload.data(), payload.size(), 0)));
  w.str(id.kiln_version);
  w.str(id.compiler);
  w.str(id.build);
  w.str(key.kind);
  auto header_size = static_cast<uint32_t>(w.out.size() + sizeof(uint64_t));
  std::memcpy(w.out.data() + sizeof kMagic + sizeof kFormatVersion, &header_size, sizeof header_size);
  w.pod(static_cast<uint64_t>(XXH64(w.out.data(), w.out.size(), 0)));
  w.out.append(payload);
  return std::move(w.out);
}

EntryHeader parse_header(std::string_view bytes, const EntryIdentity& expected) {
  EntryHeader h;
  Reader r(bytes);
  r.skip(sizeof kMagic);
  auto version = r.pod<uint32_t>();
  h.header_size = r.pod<uint32_t>();
  if (r.short_read()) {
    h.why = cat("truncated header: ", bytes.size(), " bytes");
    return h;
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    h.why = "not a kiln cache entry (bad magic)";
    return h;
  }
  if (version != kFormatVersion) {
    h.status = EntryStatus::stale;
    return h;
  }
  if (h.header_size > kMaxHeader || h.header_size < r.pos() + sizeof(uint64_t)) {
    h.why = cat("bad header size ", h.header_size);
    return h;
  }
  if (bytes.size() < h.header_size) {
    h.why = cat("truncated header: ", bytes.size(), " of ", h.header_size, " bytes");
    return h;
  }
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + h.header_size - sizeof stored, sizeof stored);
  if (stored != XXH64(bytes.data(), h.header_size - sizeof stored, 0)) {
    h.why = "header checksum mismatch";
    return h;
  }
  Reader fields(bytes.substr(0, h.header_size - sizeof stored));
  fields.skip(sizeof kMagic + 2 * sizeof(uint32_t));  // magic, format version, header size
  h.key.fingerprint.shapeless = fields.pod<uint64_t>();
  h.key.fingerprint.dims = fields.pod<uint64_t>();
  h.key.fingerprint.options = fields.pod<uint64_t>();
  h.payload_size = fields.pod<uint64_t>();
  h.payload_hash = fields.pod<uint64_t>();
  h.identity.kiln_version = fields.str();
  h.identity.compiler = fields.str();
  h.identity.build = fields.str();
  h.key.kind = fields.str();
  if (fields.short_read() || fields.pos() != h.header_size - sizeof stored) {
    h.why = "malformed header fields";
    return h;
  }
  h.status = h.identity == expected ? EntryStatus::ok : EntryStatus::stale;
  return h;
}

DecodedEntry decode_entry(std::string_view bytes, const CacheKey& key, const EntryIdentity& expected) {
  EntryHeader h = parse_header(bytes, expected);
  if (h.status != EntryStatus::ok) return {h.status, h.why, {}};
  auto corrupt = [](std::string why) { return DecodedEntry{EntryStatus::corrupt, std::move(why), {}}; };
  if (!(h.key == key)) return corrupt("the entry holds a different key than its file name says");
  uint64_t have = bytes.size() - h.header_size;
  if (have < h.payload_size) return corrupt(cat("truncated: ", have, " of ", h.payload_size, " payload bytes"));
  if (have > h.payload_size) return corrupt(cat(have - h.payload_size, " bytes after the payload"));
  std::string_view payload = bytes.substr(h.header_size);
  if (XXH64(payload.data(), payload.size(), 0) != h.payload_hash) return corrupt("payload checksum mismatch");
  return {EntryStatus::ok, {}, std::string(payload)};
}

}  // namespace kiln
