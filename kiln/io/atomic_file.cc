#include "kiln/io/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kiln/base/error.h"

namespace kiln {
namespace fs = std::filesystem;
namespace {

std::string errno_text() { return std::strerror(errno); }

// "a/b/" -> "a/b": a trailing slash would make the temporary name "a/b/.tmp.N".
std::string strip_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string parent_dir(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

std::string temp_name(const std::string& path) { return cat(path, ".tmp.", ::getpid()); }

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "cannot open '", path, "' to sync it: ", errno_text());
  bool ok = ::fsync(fd) == 0;
  std::string why = ok ? "" : errno_text();
  ::close(fd);
  KILN_CHECK(ok, "cannot sync '", path, "': ", why);
}

}  // namespace

void fsync_dir(const std::string& dir) { fsync_path(dir, O_RDONLY | O_DIRECTORY); }

AtomicFile::AtomicFile(std::string path) : path_(strip_slashes(std::move(path))) {
  tmp_ = temp_name(path_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  KILN_CHECK(fd_ >= 0, "cannot write '", path_, "': cannot create '", tmp_, "': ", errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t bytes) {
  KILN_CHECK(fd_ >= 0, "cannot write '", path_, "': the file was already committed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    KILN_CHECK(n > 0, "cannot write '", tmp_, "' (for '", path_, "'): ", errno_text());
    p += n;
    bytes -= size_t(n);
  }
}

void AtomicFile::commit() {
  KILN_CHECK(fd_ >= 0, "cannot write '", path_, "': the file was already committed");
  bool ok = ::fsync(fd_) == 0;
  std::string why = ok ? "" : errno_text();
  ok = ::close(fd_) == 0 && ok;
  if (why.empty() && !ok) why = errno_text();
  fd_ = -1;
  if (ok && ::rename(tmp_.c_str(), path_.c_str()) != 0) {
    ok = false;
    why = cat("cannot rename it over '", path_, "': ", errno_text());
  }
  if (!ok) {
    ::unlink(tmp_.c_str());
    fail("cannot write '", path_, "' (via '", tmp_, "'): ", why);
  }
  fsync_dir(parent_dir(path_));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

AtomicDir::AtomicDir(std::string path) : path_(strip_slashes(std::move(path))) {
  tmp_ = temp_name(path_);
  std::error_code ec;
  fs::remove_all(tmp_, ec);  // a stale one from a crashed process that had our pid
  KILN_CHECK(!ec, "cannot write directory '", path_, "': cannot remove the stale '", tmp_,
             "': ", ec.message());
  KILN_CHECK(::mkdir(tmp_.c_str(), 0755) == 0, "cannot write directory '", path_,
             "': cannot create '", tmp_, "': ", errno_text());
}

AtomicDir::~AtomicDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void remove_dir_atomic(const std::string& path) {
  const std::string p = strip_slashes(path), gone = temp_name(p);
  if (::rename(p.c_str(), gone.c_str()) != 0) {
    KILN_CHECK(errno == ENOENT, "cannot remove directory '", p, "': ", errno_text());
    return;
  }
  std::error_code ec;
  fs::remove_all(gone, ec);
  KILN_CHECK(!ec, "removed directory '", p, "' from sight but cannot delete it at '", gone, "': ",
             ec.message());
}

void AtomicDir::commit() {
  KILN_CHECK(!committed_, "cannot write directory '", path_, "': already committed");
  // Make the contents durable before the name that publishes them.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(tmp_, ec)) {
    if (e.is_regular_file()) fsync_path(e.path().string(), O_RDONLY);
  }
  KILN_CHECK(!ec, "cannot list '", tmp_, "': ", ec.message());
  fsync_dir(tmp_);

  struct stat st;
  if (::lstat(path_.c_str(), &st) != 0) {
    KILN_CHECK(errno == ENOENT, "cannot write directory '", path_, "': ", errno_text());
    KILN_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, "cannot rename '", tmp_, "' to '", path_,
               "': ", errno_text());
    committed_ = true;
  } else {
    KILN_CHECK(S_ISDIR(st.st_mode), "cannot write directory '", path_,
               "': it exists and is not a directory");
    KILN_CHECK(::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) == 0,
               "cannot replace directory '", path_, "' with '", tmp_, "': ", errno_text());
    committed_ = true;
    fs::remove_all(tmp_, ec);  // now the old version
    KILN_CHECK(!ec, "replaced directory '", path_, "' but cannot remove its old version at '", tmp_,
               "': ", ec.message());
  }
  fsync_dir(parent_dir(path_));
}

}  // namespace kiln
