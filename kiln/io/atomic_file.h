// Atomic file and directory publication: readers see the whole old version,
// the whole new one, or nothing, never a half-written file, even when the
// writer crashes or throws midway.
//
// A file is written to "<path>.tmp.<pid>", fsync'ed, renamed over `path`,
// and the parent directory is fsync'ed so that the rename survives a power
// loss. A directory (a model saved as several files) is built under a
// temporary name beside its destination and renamed into place the same way.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

class AtomicFile {
 public:
  // Creates (truncates) the temporary file; throws kiln::Error naming `path`.
  explicit AtomicFile(std::string path);
  // Without commit() the temporary file is removed: `path` is untouched.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // fsync, close, rename over `path`, fsync the directory.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// Writes `bytes` to `path` atomically.
void write_file_atomic(const std::string& path, std::string_view bytes);

// A directory built under "<path>.tmp.<pid>" and published by commit(). When
// `path` already exists it is replaced whole (files in it that the new
// version lacks are gone): the two are swapped with one atomic rename
// (renameat2 RENAME_EXCHANGE) and the old one is then deleted.
class AtomicDir {
 public:
  // Creates the empty temporary directory (removing a stale one left by a
  // crashed process with the same pid); throws kiln::Error naming `path`.
  explicit AtomicDir(std::string path);
  // Without commit() the temporary directory is removed.
  ~AtomicDir();
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;

  // Where to write the directory's files before commit().
  const std::string& temp_path() const { return tmp_; }
  const std::string& path() const { return path_; }
  void commit();

 private:
  std::string path_, tmp_;
  bool committed_ = false;
};

// Removes a directory so that it vanishes at once: one rename to
// "<path>.tmp.<pid>", then the deletion. A crash while deleting leaves that
// temporary, never a partial `path`. Nothing to do when `path` is absent;
// throws kiln::Error when the rename fails.
void remove_dir_atomic(const std::string& path);

// fsyncs a directory so that renames into it are durable; throws on error.
void fsync_dir(const std::string& dir);

}  // namespace kiln
