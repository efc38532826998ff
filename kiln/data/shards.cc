#include "kiln/data/shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/data/tokenizer_fingerprint.h"
#include "kiln/io/atomic_file.h"
#include "kiln/io/json_brief.h"

namespace kiln::data {
namespace fs = std::filesystem;
namespace {

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t elem_bytes;
  uint64_t tokens;
  uint64_t documents;
  uint32_t vocab_size;
  uint32_t reserved;
  uint64_t checksum;
};
static_assert(sizeof(Header) == kShardHeaderBytes);

uint64_t pad8(uint64_t n) { return (n + 7) / 8 * 8; }

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  fail("shard '", path, "' is corrupt: ", what,
       "; re-create it with `kiln data prepare`");
}

// The mapped file, unmapped when the last TokenBlock using it goes.
std::shared_ptr<const void> map_file(const std::string& path, size_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "cannot open shard '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat shard '", path, "'");
  }
  size = size_t(st.st_size);
  if (size < kShardHeaderBytes) {
    ::close(fd);
    corrupt(path, cat("the file has ", size, " bytes, shorter than the ", kShardHeaderBytes,
                      "-byte header"));
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  KILN_CHECK(p != MAP_FAILED, "cannot map shard '", path, "': ", std::strerror(errno));
  return std::shared_ptr<const void>(p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
}

std::vector<std::string> string_list(const nlohmann::json& meta, const char* key,
                                     const std::string& where) {
  std::vector<std::string> out;
  auto it = meta.find(key);
  if (it == meta.end()) return out;
  KILN_CHECK(it->is_array(), where, ": \"", key, "\" must be an array of file names, not ",
             json_brief(*it));
  for (const auto& f : *it) {
    KILN_CHECK(f.is_string(), where, ": \"", key, "\" must list file names, not ", json_brief(f));
    out.push_back(f.get<std::string>());
  }
  return out;
}

}  // namespace

void write_shard(const std::string& path, const std::vector<int32_t>& tokens,
                 const std::vector<uint64_t>& offsets, int32_t vocab_size) {
  KILN_CHECK(vocab_size > 0, "write_shard: vocab_size must be positive");
  KILN_CHECK(!offsets.empty() && offsets.front() == 0 && offsets.back() == tokens.size(),
             "write_shard: offsets must start at 0 and end at the token count");
  Header h{};
  std::memcpy(h.magic, kShardMagic, 8);
  h.version = kShardVersion;
  h.elem_bytes = vocab_size <= 65536 ? 2 : 4;
  h.tokens = tokens.size();
  h.documents = offsets.size() - 1;
  h.vocab_size = uint32_t(vocab_size);

  std::string payload(pad8(h.tokens * h.elem_bytes) + offsets.size() * 8, '\0');
  char* p = payload.data();
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t t = tokens[i];
    KILN_CHECK(t >= 0 && t < vocab_size, "write_shard '", path, "': token ", t,
               " outside the vocabulary [0, ", vocab_size, ")");
    if (h.elem_bytes == 2) {
      auto v = uint16_t(t);
      std::memcpy(p + 2 * i, &v, 2);
    } else {
      auto v = uint32_t(t);
      std::memcpy(p + 4 * i, &v, 4);
    }
  }
  std::memcpy(p + pad8(h.tokens * h.elem_bytes), offsets.data(), offsets.size() * 8);
  h.checksum = XXH64(payload.data(), payload.size(), 0);

  AtomicFile file(path);
  file.write(&h, sizeof h);
  file.write(payload);
  file.commit();
}

TokenCorpus read_shard(const std::string& path) {
  size_t size = 0;
  auto mapping = map_file(path, size);
  auto* base = static_cast<const char*>(mapping.get());
  Header h;
  std::memcpy(&h, base, sizeof h);
  if (std::memcmp(h.magic, kShardMagic, 8) != 0)
    corrupt(path, "it does not start with the kiln shard magic \"KILNTOK\"");
  if (h.version != kShardVersion)
    corrupt(path, cat("format version ", h.version, " (this kiln reads ", kShardVersion, ")"));
  if (h.elem_bytes != 2 && h.elem_bytes != 4)
    corrupt(path, cat(h.elem_bytes, " bytes per token (expected 2 or 4)"));
  if (h.vocab_size == 0 || (h.elem_bytes == 2 && h.vocab_size > 65536))
    corrupt(path, cat("vocab_size ", h.vocab_size, " with ", h.elem_bytes, "-byte tokens"));
  // Sizes are checked without overflow: both counts are bounded by the file.
  uint64_t body = size - kShardHeaderBytes;
  if (h.tokens > body / h.elem_bytes || h.documents >= body / 8)
    corrupt(path, cat("the header claims ", h.tokens, " tokens and ", h.documents,
                      " documents, more than the file's ", size, " bytes hold"));
  uint64_t token_bytes = pad8(h.tokens * h.elem_bytes);
  uint64_t expected = kShardHeaderBytes + token_bytes + (h.documents + 1) * 8;
  if (expected != size)
    corrupt(path, cat("the file has ", size, " bytes but its header (", h.tokens, " tokens, ",
                      h.documents, " documents) needs ", expected, " (truncated?)"));
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // the fuzz build: reach the checks below
  if (XXH64(base + kShardHeaderBytes, body, 0) != h.checksum)
    corrupt(path, "the checksum of its contents does not match the header");
#endif

  const char* off_bytes = base + kShardHeaderBytes + token_bytes;
  std::vector<uint64_t> offsets(h.documents + 1);
  std::memcpy(offsets.data(), off_bytes, offsets.size() * 8);
  if (offsets.front() != 0 || offsets.back() != h.tokens)
    corrupt(path, "document offsets must start at 0 and end at the token count");
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    if (offsets[i] > offsets[i + 1]) corrupt(path, cat("document offsets decrease at ", i));

  TokenBlock block{mapping, base + kShardHeaderBytes, int(h.elem_bytes), int64_t(h.tokens)};
  for (int64_t i = 0; i < block.size; ++i)
    if (uint32_t(block.at(i)) >= h.vocab_size)
      corrupt(path, cat("token ", block.at(i), " at ", i, " is outside its vocabulary of ",
                        h.vocab_size));
  TokenCorpus corpus;
  corpus.add_block(std::move(block), offsets);
  return corpus;
}

bool is_shard_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::exists(fs::path(path) / "meta.json", ec);
  if (!fs::is_regular_file(path, ec)) return false;  // opening a pipe would wait for a writer
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::memcmp(magic, kShardMagic, 8) == 0;
}

PreparedShards read_prepared(const std::string& path) {
  PreparedShards out;
  std::error_code ec;
  KILN_CHECK(fs::exists(path, ec), "data path '", path, "' does not exist");
  if (!fs::is_directory(path, ec)) {
    out.train = read_shard(path);
    std::ifstream in(path, std::ios::binary);
    Header h;
    in.read(reinterpret_cast<char*>(&h), sizeof h);
    out.vocab_size = int32_t(h.vocab_size);
    return out;
  }
  std::string meta_path = (fs::path(path) / "meta.json").string();
  std::ifstream in(meta_path);
  KILN_CHECK(in, "cannot read '", meta_path, "': a prepared shards folder needs it");
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("'", meta_path, "' is not valid JSON (", e.what(), "); re-create it with `kiln data prepare`");
  }
  KILN_CHECK(meta.is_object() && meta.value("format", "") == "kiln-shards", "'", meta_path,
             "' is not a kiln shards description (no \"format\": \"kiln-shards\")");
  auto vocab = meta.find("vocab_size");
  KILN_CHECK(vocab != meta.end() && vocab->is_number_integer() && *vocab > 0 &&
                 *vocab <= std::numeric_limits<int32_t>::max(),
             "'", meta_path, "': \"vocab_size\" must be a positive 32-bit integer");
  out.vocab_size = vocab->get<int32_t>();
  out.tokenizer_name = meta.value("tokenizer", "");
  if (auto f = meta.find("tokenizer_fingerprint"); f != meta.end()) {
    out.tokenizer_fingerprint = f->is_string() ? parse_fingerprint(f->get<std::string>()) : std::nullopt;
    KILN_CHECK(out.tokenizer_fingerprint, "'", meta_path,
               "': \"tokenizer_fingerprint\" must be 16 hex digits, got ", f->dump());
  }
  auto train = string_list(meta, "train", meta_path);
  auto val = string_list(meta, "val", meta_path);
  KILN_CHECK(!train.empty(), "'", meta_path, "' lists no training shards");
  for (const auto& f : train) out.train.append(read_shard((fs::path(path) / f).string()));
  for (const auto& f : val) out.val.append(read_shard((fs::path(path) / f).string()));
  out.has_val = !val.empty();
  return out;
}

}  // namespace kiln::data
