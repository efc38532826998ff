// The on-disk form of one compile-cache entry (L2 and L3): a header, then the
// payload.
//
//   magic "KILNCCE\0" | u32 format version | u32 header size
//   | u64 x3 fingerprint | u64 payload size | u64 xxHash64(payload)
//   | str kiln version | str compiler | str build | str kind   (str = u32 length + bytes)
//   | u64 xxHash64(every header byte before this one)
//   | payload
//
// Integers are in host byte order (a cache directory belongs to one host or
// one architecture; a foreign file fails the magic or checksum checks).
// An entry written by another kiln version, compiler, build of libkiln or
// format version is *stale*: a miss, never used, and silently replaced by the
// next write. (The build ID makes a rebuilt kiln with changed code but the
// same KILN_VERSION ignore what the old code compiled.)
// Anything that does not parse or check out is *corrupt*, with a reason.
#pragma once
#include <string>
#include <string_view>

#include "kiln/runtime/cache_key.h"

namespace kiln {

// Who wrote an entry; an entry is used only by the same identity.
struct EntryIdentity {
  std::string kiln_version;
  std::string compiler;
  std::string build;  // libkiln's build ID (build_id.h)
  friend bool operator==(const EntryIdentity&, const EntryIdentity&) = default;
};

// The identity of this build: KILN_VERSION, the compiler that built kiln and
// libkiln's build ID.
EntryIdentity build_identity();

std::string encode_entry(const CacheKey& key, const EntryIdentity& id, std::string_view payload);

enum class EntryStatus { ok, stale, corrupt };

struct EntryHeader {
  EntryStatus status = EntryStatus::corrupt;
  std::string why;  // for corrupt: what is wrong
  CacheKey key;
  EntryIdentity identity;
  uint64_t header_size = 0, payload_size = 0, payload_hash = 0;
};

// Parses and checks the header at the start of `bytes` (which may be only a
// prefix of the file). `status` is stale for another format version or
// another identity than `expected`.
EntryHeader parse_header(std::string_view bytes, const EntryIdentity& expected);

struct DecodedEntry {
  EntryStatus status = EntryStatus::corrupt;
  std::string why;
  std::string payload;  // only when ok
};

// Checks a whole file's bytes: header, identity, that it holds `key`, the
// payload's length and checksum.
DecodedEntry decode_entry(std::string_view bytes, const CacheKey& key, const EntryIdentity& expected);

}  // namespace kiln
