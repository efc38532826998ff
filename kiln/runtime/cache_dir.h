// One on-disk tier of the compile cache (L2 or L3): a directory of entry
// files that several processes read and write at once.
//
// Writers publish atomically: the bytes go to a unique temporary file in the
// same directory, are fsync'ed, and rename() puts the file in place, so a
// reader opens either the whole old file, the whole new one, or none; it never
// sees a file being written. (The directory itself is not fsync'ed: after a
// power loss an entry may be missing, which is only a miss.)
//
// Compile-once across processes uses flock() on "<entry>.lock" beside the
// entry rather than an O_EXCL lock file: the kernel releases an flock when its
// holder dies, so a crashed compile never leaves a lock that others wait on
// forever, and no staleness guess is needed. Lock files are left in place
// (removing one while another process waits on it would let two holders in).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime/cache_entry.h"

namespace kiln {

// Creates `path` (mode 0700, parents as needed) when missing and checks that
// it is a directory this process can write, that belongs to this user and that
// no one else can write: entries hold compiled code that kiln loads and runs,
// so a directory others can write (a planted /dev/shm/kiln-cache-<uid>, say)
// is refused. Returns "" when usable, else why not.
std::string prepare_cache_dir(const std::string& path);

class CacheDir {
 public:
  explicit CacheDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
  };
  struct ReadResult {
    bool found = false;
    std::string bytes;
    FileId id;
    std::string error;  // an I/O error other than "no such file"
  };
  ReadResult read(const std::string& name) const;

  // Publishes `bytes` as `name` atomically. Returns "" or what went wrong.
  std::string publish(const std::string& name, std::string_view bytes) const;

  // Removes `name` if it is still the file `id` (not one published since).
  void remove_if_same(const std::string& name, FileId id) const;

  // Marks the entry `name` as just used: its modification time, which
  // publishing sets too, orders trim()'s removals.
  void touch(const std::string& name) const;

  // Holds flock(LOCK_EX) on "<name>.lock" until destroyed. When the lock file
  // cannot be opened the lock is empty: callers go on unlocked (at worst two
  // processes compile the same entry; still exactly one file results).
  class Lock {
   public:
    Lock() = default;
    explicit Lock(int fd) : fd_(fd) {}
    Lock(Lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Lock& operator=(Lock&&) = delete;
    ~Lock();
    bool held() const { return fd_ >= 0; }

   private:
    int fd_ = -1;
  };
  Lock lock(const std::string& name) const;

  // What the directory holds; `stale` and `corrupt` entries are counted in
  // `entries` and `bytes` too.
  struct Usage {
    int64_t entries = 0, bytes = 0, stale = 0, corrupt = 0;
  };
  Usage usage(const EntryIdentity& identity) const;

  // The file of the cache's run statistics (CompileCache::record_run_stats).
  static constexpr const char* kRunStats = "run-stats.kcs";

  // Deletes every file the cache made here (entries, run statistics,
  // temporary and lock files) and nothing else; returns the entries and
  // bytes removed.
  Usage clear() const;
  // When the entries here take more than `max_bytes`, removes the least
  // recently used (published or touched) until they take at most 3/4 of it,
  // so that trimming is rare; the entry `keep` (the one just published)
  // stays. Returns the bytes the entries take after it; `removed` (when
  // given) counts what went. Only sizes and times are read, not the entries.
  int64_t trim(int64_t max_bytes, const std::string& keep, Usage* removed = nullptr) const;
  // Deletes the entries no run of `identity` can use (stale: another kiln
  // version, compiler or build; or corrupt), each only while it is still the
  // file that was judged; returns what it removed.
  Usage clear_unusable(const EntryIdentity& identity) const;

 private:
  struct EntryFile {
    std::string name;
    FileId id;
    int64_t bytes = 0;
    EntryStatus status = EntryStatus::ok;
  };
  // Every entry file here, judged by its header against `identity`.
  std::vector<EntryFile> entry_files(const EntryIdentity& identity) const;

  std::string path_;
};

}  // namespace kiln
