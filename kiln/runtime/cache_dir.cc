#include "kiln/runtime/cache_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "kiln/base/error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// The files the cache makes: "<key>.kce", "<key>.kce.lock", ".<key>.kce.tmpXXXXXX",
// and the same three of the run statistics, CacheDir::kRunStats (".kcs").
bool is_entry(std::string_view name) { return !name.starts_with('.') && name.ends_with(".kce"); }
bool is_stats(std::string_view name) { return name == CacheDir::kRunStats; }
bool is_lock(std::string_view name) { return name.ends_with(".kce.lock") || name.ends_with(".kcs.lock"); }
bool is_temp(std::string_view name) {
  return name.starts_with('.') &&
         (name.find(".kce.tmp") != std::string_view::npos || name.find(".kcs.tmp") != std::string_view::npos);
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(n);
  }
  return true;
}

// Adds an entry file of `bytes` judged `s` to `u`.
void count(CacheDir::Usage& u, int64_t bytes, EntryStatus s) {
  ++u.entries;
  u.bytes += bytes;
  u.stale += s == EntryStatus::stale;
  u.corrupt += s == EntryStatus::corrupt;
}

// Reads up to `limit` bytes of an open file.
bool read_upto(int fd, size_t limit, std::string& out) {
  out.resize(limit);
  size_t have = 0;
  while (have < limit) {
    ssize_t n = ::read(fd, out.data() + have, limit - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    have += n;
  }
  out.resize(have);
  return true;
}

}  // namespace

std::string prepare_cache_dir(const std::string& path) {
  if (path.empty()) return "no directory given";
  std::error_code ec;
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return errno_text("cannot create " + path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_text("cannot stat " + path);
  if (!S_ISDIR(st.st_mode)) return path + " is not a directory";
  if (st.st_uid != ::geteuid()) return path + " belongs to another user";
  if ((st.st_mode & (S_IWGRP | S_IWOTH))) return path + " is writable by other users";
  if (::access(path.c_str(), R_OK | W_OK | X_OK) != 0) return errno_text("cannot write " + path);
  return "";
}

CacheDir::ReadResult CacheDir::read(const std::string& name) const {
  ReadResult r;
  int fd = ::open(file(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) r.error = errno_text("cannot open " + file(name));
    return r;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !read_upto(fd, st.st_size, r.bytes)) {
    r.error = errno_text("cannot read " + file(name));
  } else {
    r.found = true;
    r.id = {st.st_dev, st.st_ino};
  }
  ::close(fd);
  return r;
}

std::string CacheDir::publish(const std::string& name, std::string_view bytes) const {
  std::string tmp = path_ + "/." + name + ".tmpXXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return errno_text("cannot create a file in " + path_);
  bool ok = write_all(fd, bytes) && ::fsync(fd) == 0;
  std::string error = ok ? "" : errno_text("cannot write " + tmp);
  if (::close(fd) != 0 && ok) error = errno_text("cannot write " + tmp);
  if (error.empty() && ::rename(tmp.c_str(), file(name).c_str()) != 0) {
    error = errno_text("cannot rename " + tmp + " to " + file(name));
  }
  if (!error.empty()) ::unlink(tmp.c_str());
  return error;
}

void CacheDir::remove_if_same(const std::string& name, FileId id) const {
  // A small window remains between stat and unlink; losing that race deletes
  // a good entry, which costs a recompile, never a wrong result.
  struct stat st;
  if (::stat(file(name).c_str(), &st) == 0 && st.st_dev == id.dev && st.st_ino == id.ino) {
    ::unlink(file(name).c_str());
  }
}

void CacheDir::touch(const std::string& name) const {
  ::utimensat(AT_FDCWD, file(name).c_str(), nullptr, 0);  // a failure only ages the entry
}

int64_t CacheDir::trim(int64_t max_bytes, const std::string& keep, Usage* removed) const {
  struct Seen {
    std::string name;
    FileId id;
    int64_t bytes;
    timespec used;
  };
  std::vector<Seen> seen;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path_, ec)) {
    std::string name = e.path().filename().string();
    struct stat st;
    if (!is_entry(name) || ::stat(e.path().c_str(), &st) != 0) continue;
    total += st.st_size;
    if (name != keep) seen.push_back({name, {st.st_dev, st.st_ino}, st.st_size, st.st_mtim});
  }
  if (total <= max_bytes) return total;
  std::sort(seen.begin(), seen.end(), [](const Seen& a, const Seen& b) {
    return std::tie(a.used.tv_sec, a.used.tv_nsec) < std::tie(b.used.tv_sec, b.used.tv_nsec);
  });
  for (const Seen& f : seen) {
    if (total <= max_bytes / 4 * 3) break;
    remove_if_same(f.name, f.id);
    total -= f.bytes;
    if (removed) count(*removed, f.bytes, EntryStatus::ok);
  }
  return total;
}

CacheDir::Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

CacheDir::Lock CacheDir::lock(const std::string& name) const {
  int fd = ::open(file(name + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Lock();
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd);
      return Lock();
    }
  }
  return Lock(fd);
}

std::vector<CacheDir::EntryFile> CacheDir::entry_files(const EntryIdentity& identity) const {
  std::vector<EntryFile> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path_, ec)) {
    std::string name = e.path().filename().string();
    if (!is_entry(name)) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // removed since the listing
    struct stat st;
    std::string head;
    if (::fstat(fd, &st) == 0 && read_upto(fd, 1 << 16, head))
      out.push_back({name, {st.st_dev, st.st_ino}, st.st_size, parse_header(head, identity).status});
    ::close(fd);
  }
  return out;
}

CacheDir::Usage CacheDir::usage(const EntryIdentity& identity) const {
  Usage u;
  for (const EntryFile& f : entry_files(identity)) count(u, f.bytes, f.status);
  return u;
}

CacheDir::Usage CacheDir::clear_unusable(const EntryIdentity& identity) const {
  Usage u;
  for (const EntryFile& f : entry_files(identity)) {
    if (f.status == EntryStatus::ok) continue;
    remove_if_same(f.name, f.id);
    count(u, f.bytes, f.status);
  }
  return u;
}

CacheDir::Usage CacheDir::clear() const {
  Usage u;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path_, ec)) {
    std::string name = e.path().filename().string();
    if (!is_entry(name) && !is_stats(name) && !is_lock(name) && !is_temp(name)) continue;
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0 || ::unlink(e.path().c_str()) != 0) continue;
    if (is_entry(name)) {
      ++u.entries;
      u.bytes += st.st_size;
    }
  }
  return u;
}

}  // namespace kiln
