// The tiered compile cache: hits per tier, sharing L2 between processes,
// reuse of L3 by a later run, versioned and checksummed entries, concurrent
// writers. Every test uses its own temporary directories; "another process"
// is a fork()ed child and "another run" a fresh CompileCache on the same
// directories.
#include "kiln/runtime/compile_cache.h"

#include <dlfcn.h>
#include <link.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/runtime/build_id.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Options = CompileCache::Options;
using test::TempDir;

CacheKey key(uint64_t n, std::string kind = "program") { return {{n, 0x1234, 0x5678}, std::move(kind)}; }

Options dirs(std::string l2, std::string l3) {
  Options o;
  o.l2_dir = std::move(l2);
  o.l3_dir = std::move(l3);
  return o;
}

// A compile callback that counts its calls and takes measurable time.
struct Compiler {
  std::string payload;
  int calls = 0;
  std::function<std::string()> fn() {
    return [this] {
      ++calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return payload;
    };
  }
};

void expect_tier(const TierStats& s, int64_t requests, int64_t hits, int64_t misses, const char* tier) {
  EXPECT_EQ(s.requests, requests) << tier;
  EXPECT_EQ(s.hits, hits) << tier;
  EXPECT_EQ(s.misses, misses) << tier;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Runs `child` in a fork()ed process; its return value is the exit status.
pid_t spawn(const std::function<int()>& child) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(child());
  EXPECT_GT(pid, 0);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CompileCache, HitsAreCountedPerTier) {
  TempDir tmp;
  Compiler c{"compiled program"};
  const int64_t n = c.payload.size();
  {
    CompileCache first(dirs(tmp / "l2", tmp / "l3"));
    EXPECT_EQ(first.get_or_compile(key(1), c.fn()), c.payload);
    CacheStats s = first.stats();
    expect_tier(s.l1, 1, 0, 1, "l1");
    expect_tier(s.l2, 1, 0, 1, "l2");
    expect_tier(s.l3, 1, 0, 1, "l3");
    EXPECT_GE(s.l3.compile_seconds, 0.01);  // charged to the tier that missed last
    EXPECT_EQ(s.l1.compile_seconds + s.l2.compile_seconds, 0);
    EXPECT_EQ(s.l1.bytes_written, n);
    EXPECT_EQ(s.l2.bytes_written, n);
    EXPECT_EQ(s.l3.bytes_written, n);

    EXPECT_EQ(first.get_or_compile(key(1), c.fn()), c.payload);
    s = first.stats();
    expect_tier(s.l1, 2, 1, 1, "l1 after a repeat");
    expect_tier(s.l2, 1, 0, 1, "l2 untouched by an L1 hit");
    EXPECT_EQ(s.l1.bytes_read, n);
    EXPECT_EQ(c.calls, 1);
  }
  {  // Another process of this host: L2 serves it.
    CompileCache same_host(dirs(tmp / "l2", tmp / "l3"));
    EXPECT_EQ(same_host.get_or_compile(key(1), c.fn()), c.payload);
    CacheStats s = same_host.stats();
    expect_tier(s.l1, 1, 0, 1, "l1");
    expect_tier(s.l2, 1, 1, 0, "l2");
    expect_tier(s.l3, 0, 0, 0, "l3");
    EXPECT_EQ(s.l2.bytes_read, n);
  }
  {  // A later run on another host (empty L2): L3 serves it and fills L2.
    CompileCache later(dirs(tmp / "other_l2", tmp / "l3"));
    EXPECT_EQ(later.get_or_compile(key(1), c.fn()), c.payload);
    CacheStats s = later.stats();
    expect_tier(s.l2, 1, 0, 1, "l2");
    expect_tier(s.l3, 1, 1, 0, "l3");
    EXPECT_EQ(s.l2.bytes_written, n);  // promoted
  }
  {
    CompileCache promoted(dirs(tmp / "other_l2", ""));
    EXPECT_EQ(promoted.get(key(1)), c.payload);
    expect_tier(promoted.stats().l2, 1, 1, 0, "l2 filled by promotion");
  }
  EXPECT_EQ(c.calls, 1);
}

TEST(CompileCache, GetPutClearAndResetStats) {
  TempDir tmp;
  CompileCache cache(dirs(tmp / "l2", tmp / "l3"));
  EXPECT_EQ(cache.get(key(7)), std::nullopt);
  cache.put(key(7), "seven");
  cache.put(key(7, "cpu_fused_so"), "another artifact of the same graph");
  EXPECT_EQ(cache.get(key(7)), "seven");
  EXPECT_EQ(cache.get(key(7, "cpu_fused_so")), "another artifact of the same graph");
  EXPECT_EQ(cache.disk_usage(CacheTier::l2).entries, 2);
  EXPECT_EQ(cache.disk_usage(CacheTier::l3).entries, 2);

  cache.clear(true, true, false);
  EXPECT_EQ(cache.disk_usage(CacheTier::l2).entries, 0);
  cache.reset_stats();
  EXPECT_EQ(cache.get(key(7)), "seven");  // from L3, back into L1 and L2
  CacheStats s = cache.stats();
  expect_tier(s.l1, 1, 0, 1, "l1");
  expect_tier(s.l2, 1, 0, 1, "l2");
  expect_tier(s.l3, 1, 1, 0, "l3");
  EXPECT_EQ(cache.disk_usage(CacheTier::l2).entries, 1);

  cache.clear(true, true, true);
  EXPECT_EQ(cache.get(key(7)), std::nullopt);
  EXPECT_EQ(cache.disk_usage(CacheTier::l3).entries, 0);
  EXPECT_TRUE(fs::is_empty(tmp / "l3")) << "clear leaves no lock or temporary files";
}

TEST(CompileCache, TwoProcessesSharingL2CompileOnce) {
  TempDir tmp;
  const std::string counter = tmp / "compiles";
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    // Each process has its own L3, so only L2 can carry the result between them.
    children.push_back(spawn([&, i] {
      ::close(start[1]);
      char go;
      (void)!::read(start[0], &go, 1);  // returns when the parent closes the pipe
      CompileCache cache(dirs(tmp / "l2", tmp / ("l3_" + std::to_string(i))));
      std::string got = cache.get_or_compile(key(42), [&] {
        std::ofstream(counter, std::ios::app) << "compiled by " << i << "\n";
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others arrive meanwhile
        return std::string("the program");
      });
      return got == "the program" ? 0 : 1;
    }));
  }
  ::close(start[0]);
  ::close(start[1]);  // releases all children at once
  for (pid_t pid : children) EXPECT_EQ(wait_exit(pid), 0);

  std::string log = read_file(counter);
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  CompileCache check(dirs(tmp / "l2", ""));
  EXPECT_EQ(check.disk_usage(CacheTier::l2).entries, 1);
  EXPECT_EQ(check.get(key(42)), "the program");
}

TEST(CompileCache, ThreadsMissingTheSameKeyCompileOnce) {
  CompileCache cache(dirs("", ""));  // no disk tier, so no lock file either
  std::atomic<int> calls = 0;
  std::vector<std::thread> threads;
  std::vector<std::string> got(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      got[i] = cache.get_or_compile(key(3), [&] {
        ++calls;
        EXPECT_EQ(cache.compiles_in_flight(), 1u);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return std::string("once");
      });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  for (const auto& g : got) EXPECT_EQ(g, "once");
  expect_tier(cache.stats().l1, 8, 7, 1, "l1");
  EXPECT_EQ(cache.compiles_in_flight(), 0u);  // the key's lock left with its last caller
}

TEST(CompileCache, ASecondRunHitsL3) {
  TempDir tmp;
  Compiler c{std::string(100000, 'p')};
  {
    CompileCache first_run(dirs("", tmp / "l3"));
    first_run.get_or_compile(key(5), c.fn());
  }
  CompileCache second_run(dirs("", tmp / "l3"));
  EXPECT_EQ(second_run.get_or_compile(key(5), c.fn()), c.payload);
  EXPECT_EQ(c.calls, 1);
  CacheStats s = second_run.stats();
  expect_tier(s.l3, 1, 1, 0, "l3");
  EXPECT_EQ(s.l3.bytes_read, 100000);
  EXPECT_EQ(s.l3.compile_seconds, 0);
}

// Sets a file's modification time, the order CacheDir::trim removes in.
void set_used(const std::string& path, time_t seconds_ago) {
  timespec t[2];
  ::clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= seconds_ago;
  t[1] = t[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

TEST(CacheDir, TrimRemovesTheLeastRecentlyUsedEntriesFirst) {
  TempDir tmp;
  CacheDir dir(tmp / "d");
  ASSERT_EQ(prepare_cache_dir(dir.path()), "");
  for (int i = 0; i < 6; ++i) {
    const std::string name = "e" + std::to_string(i) + ".kce";
    ASSERT_EQ(dir.publish(name, std::string(1000, 'x')), "");
    set_used(dir.file(name), 100 - i);  // e0 oldest
  }
  write_file(dir.file("notes.txt"), std::string(5000, 'n'));  // not the cache's: never counted or removed
  dir.touch("e0.kce");                                       // read just now: the most recent
  EXPECT_EQ(dir.trim(6000, "e5.kce"), 6000);                 // within the bound: nothing goes
  CacheDir::Usage removed;
  EXPECT_EQ(dir.trim(5000, "e5.kce", &removed), 3000);  // down to 3/4 of the bound
  EXPECT_EQ(removed.entries, 3);
  EXPECT_EQ(removed.bytes, 3000);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(fs::exists(dir.file("e" + std::to_string(i) + ".kce")), i == 0 || i >= 4) << i;
  EXPECT_TRUE(fs::exists(dir.file("notes.txt")));
  // The entry just published stays, even alone over the bound.
  EXPECT_EQ(dir.trim(100, "e4.kce"), 1000);
  EXPECT_TRUE(fs::exists(dir.file("e4.kce")));
  EXPECT_FALSE(fs::exists(dir.file("e0.kce")));
}

TEST(CompileCache, ADiskTierPastItsBoundKeepsTheEntriesUsedLast) {
  TempDir tmp;
  Compiler c{std::string(1000, 'p')};
  Options o = dirs("", tmp / "l3");
  const std::string l3 = tmp / "l3";
  auto file = [&](uint64_t n) { return l3 + "/" + entry_name(key(n)); };
  {
    CompileCache first_run(o);
    for (uint64_t n : {1, 2, 3}) first_run.get_or_compile(key(n), c.fn());
  }
  const int64_t entry = int64_t(fs::file_size(file(1)));
  for (uint64_t n : {1, 2, 3}) set_used(file(n), 100 - int64_t(n));  // 1 oldest
  o.l3_max_bytes = entry * 7 / 2;
  CompileCache second_run(o);
  EXPECT_EQ(second_run.get_or_compile(key(1), c.fn()), c.payload);  // a hit: 1 is now the newest
  second_run.get_or_compile(key(4), c.fn());                         // 4 entries: past the bound
  EXPECT_EQ(c.calls, 4);
  for (uint64_t n : {1, 2, 3, 4}) EXPECT_EQ(fs::exists(file(n)), n == 1 || n == 4) << n;
  // Back under the bound, the next store removes nothing.
  second_run.get_or_compile(key(5), c.fn());
  EXPECT_TRUE(fs::exists(file(4)) && fs::exists(file(5)));
}

// A damaged L3 entry: what to do to the file, and what the report must say.
struct Damage {
  const char* name;
  std::function<std::string(std::string)> apply;
  const char* why;
};

// L1 alone (the disk tiers off), bounded to two and a half entries: a third
// entry sends out the least recently used one, and a hit marks it used.
TEST(CompileCache, L1PastItsBoundForgetsTheEntryUsedLongestAgo) {
  Compiler c{std::string(1000, 'p')};
  Options o = dirs("", "");
  o.l1_max_bytes = 2500;
  CompileCache cache(o);
  for (uint64_t n : {1, 2}) cache.get_or_compile(key(n), c.fn());
  EXPECT_EQ(cache.get(key(1)), c.payload);  // 2 is now the oldest
  cache.get_or_compile(key(3), c.fn());
  EXPECT_EQ(c.calls, 3);
  for (uint64_t n : {1, 2, 3}) EXPECT_EQ(cache.has(key(n)), n != 2) << n;
  cache.get_or_compile(key(2), c.fn());  // compiled again, and 1 goes
  EXPECT_EQ(c.calls, 4);
  for (uint64_t n : {1, 2, 3}) EXPECT_EQ(cache.has(key(n)), n != 1) << n;
  // An entry larger than the bound stays alone until the next.
  Compiler big{std::string(4000, 'b')};
  cache.get_or_compile(key(5), big.fn());
  for (uint64_t n : {2, 3, 5}) EXPECT_EQ(cache.has(key(n)), n == 5) << n;
  EXPECT_EQ(cache.get(key(5)), big.payload);
}

TEST(CompileCache, ADamagedEntryIsReportedOnceDeletedAndRecompiled) {
  std::vector<Damage> damages = {
      {"cut in the payload", [](std::string b) { return b.substr(0, b.size() - 5); }, "truncated: "},
      {"cut in the header", [](std::string b) { return b.substr(0, 30); }, "truncated header"},
      {"emptied", [](std::string) { return std::string(); }, "truncated header"},
      {"payload byte flipped", [](std::string b) { b.back() ^= 1; return b; }, "payload checksum"},
      {"header byte flipped", [](std::string b) { return b.replace(20, 1, 1, char(b[20] ^ 1)); }, "header checksum"},
      {"bytes appended", [](std::string b) { return b + "xyz"; }, "3 bytes after the payload"},
      {"not an entry", [](std::string b) { return std::string(b.size(), 'z'); }, "bad magic"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    TempDir tmp;
    Compiler c{"the real program"};
    CompileCache(dirs("", tmp / "l3")).get_or_compile(key(9), c.fn());
    std::string path = tmp / ("l3/" + entry_name(key(9)));
    write_file(path, d.apply(read_file(path)));

    CompileCache next_run(dirs("", tmp / "l3"));
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(next_run.get_or_compile(key(9), c.fn()), c.payload);
    next_run.clear(true, false, false);
    EXPECT_EQ(next_run.get_or_compile(key(9), c.fn()), c.payload);  // the rewritten entry
    std::string err = ::testing::internal::GetCapturedStderr();

    EXPECT_EQ(c.calls, 2) << "recompiled, not trusted";
    std::string expected = "kiln: compile cache entry " + path + " is corrupt (";
    EXPECT_EQ(err.find(expected), 0u) << err;
    EXPECT_NE(err.find(d.why), std::string::npos) << err;
    EXPECT_NE(err.find("); recompiling\n"), std::string::npos) << err;
    EXPECT_EQ(err.find(expected, 1), std::string::npos) << "reported once: " << err;
    CacheStats s = next_run.stats();
    EXPECT_EQ(s.corrupt_entries, 1);
    expect_tier(s.l3, 2, 1, 1, "l3");
    EXPECT_EQ(next_run.disk_usage(CacheTier::l3).corrupt, 0);
  }
}

TEST(CompileCache, AnotherKilnVersionCompilerOrBuildMisses) {
  TempDir tmp;
  Compiler c{"built by 0.1"};
  CompileCache(dirs(tmp / "l2", tmp / "l3")).get_or_compile(key(11), c.fn());

  for (int change = 0; change < 3; ++change) {
    Options other = dirs(tmp / "l2", tmp / "l3");
    EntryIdentity& id = other.identity;
    (change == 0 ? id.kiln_version : change == 1 ? id.compiler : id.build) = "something else";
    CompileCache upgraded(other);
    EXPECT_EQ(upgraded.disk_usage(CacheTier::l3).stale, 1);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(upgraded.get_or_compile(key(11), c.fn()), c.payload);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "a stale entry is not corrupt";
    EXPECT_EQ(c.calls, 2 + 2 * change);
    CacheStats s = upgraded.stats();
    expect_tier(s.l2, 1, 0, 1, "l2");
    expect_tier(s.l3, 1, 0, 1, "l3");
    EXPECT_EQ(s.corrupt_entries, 0);
    // Its own entry replaced the stale one; the original build now sees that as stale.
    EXPECT_EQ(CompileCache(dirs(tmp / "l2", tmp / "l3")).disk_usage(CacheTier::l3).stale, 1);
    CompileCache(dirs(tmp / "l2", tmp / "l3")).get_or_compile(key(11), c.fn());
  }
}

TEST(CompileCache, ConcurrentWritersNeverTearReads) {
  TempDir tmp;
  // Writers store different payloads under one key (sizes differ, bytes are
  // the writer's letter), so a torn read would show mixed letters or a wrong size.
  auto payload = [](int writer) { return std::string((writer + 1) * 100000, char('a' + writer)); };
  auto valid = [&](const std::optional<std::string>& p) {
    if (!p || p->empty()) return false;
    int writer = p->front() - 'a';
    return writer >= 0 && writer < 16 && *p == payload(writer);
  };
  auto hammer = [&](int first_writer) {
    CompileCache writer(dirs(tmp / "l2", tmp / "l3"));
    std::atomic<int> bad = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 30; ++i) {
          writer.put(key(13), payload(first_writer + t));
          // A fresh cache has an empty L1, so it reads the disk: L2, or L3 alone.
          CompileCache reader(dirs(i % 2 ? "" : tmp / "l2", tmp / "l3"));
          bad += !valid(reader.get(key(13))) + static_cast<int>(reader.stats().corrupt_entries);
        }
      });
    }
    for (auto& t : threads) t.join();
    return bad + static_cast<int>(writer.stats().corrupt_entries);
  };
  std::vector<pid_t> children;
  for (int p = 0; p < 3; ++p) children.push_back(spawn([&, p] { return std::min(hammer(2 * p + 2), 100); }));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(hammer(0), 0);
  for (pid_t pid : children) EXPECT_EQ(wait_exit(pid), 0) << "bad reads in a child";
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "no corrupt entry, no failed write";
  CompileCache check(dirs(tmp / "l2", tmp / "l3"));
  EXPECT_EQ(check.disk_usage(CacheTier::l2).entries, 1) << "one file per key, no leftovers";
  EXPECT_EQ(check.disk_usage(CacheTier::l2).corrupt, 0);
}

TEST(CompileCache, ACompileThatThrowsStoresNothing) {
  TempDir tmp;
  CompileCache cache(dirs(tmp / "l2", tmp / "l3"));
  EXPECT_THROW(cache.get_or_compile(key(17), []() -> std::string { throw Error("no kernel"); }), Error);
  EXPECT_EQ(cache.get(key(17)), std::nullopt);
  EXPECT_EQ(cache.compiles_in_flight(), 0u);
  EXPECT_EQ(cache.get_or_compile(key(17), [] { return std::string("second try"); }), "second try");
}

TEST(CompileCache, AnUnusableDirectoryTurnsItsTierOff) {
  TempDir tmp;
  write_file(tmp / "a_file", "x");
  ::testing::internal::CaptureStderr();
  CompileCache cache(dirs(tmp / "l2", tmp / "a_file"));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("kiln: compile cache L3 is off: " + (tmp / "a_file") + " is not a directory"),
            std::string::npos)
      << err;
  EXPECT_EQ(cache.l3_dir(), "");
  EXPECT_EQ(cache.l2_dir(), tmp / "l2");
  EXPECT_NE(cache.disabled_reason(CacheTier::l3), "");
  Compiler c{"still works"};
  EXPECT_EQ(cache.get_or_compile(key(1), c.fn()), c.payload);
  EXPECT_GE(cache.stats().l2.compile_seconds, 0.01);  // L2 is now the last tier to miss
  EXPECT_EQ(cache.stats().l3.requests, 0);
}

TEST(CompileCache, AKindThatCannotBeAFileNameIsAnError) {
  CompileCache cache(dirs("", ""));
  for (const char* kind : {"", "../evil", "a/b", "with space"}) {
    EXPECT_THROW(cache.get(key(1, kind)), Error) << kind;
  }
}

// Sets environment variables for one scope and restores them after.
class EnvGuard {
 public:
  EnvGuard(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      value ? ::setenv(name, value, 1) : ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (auto& [name, old] : saved_) old ? ::setenv(name, old->c_str(), 1) : ::unsetenv(name);
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST(CompileCache, OptionsComeFromTheEnvironment) {
  {
    EnvGuard env({{"KILN_CACHE", nullptr}, {"KILN_CACHE_DIR", "/x/cache"}, {"KILN_L2_CACHE_DIR", "/x/shm"}});
    Options o = Options::from_env();
    EXPECT_EQ(o.l2_dir, "/x/shm");
    EXPECT_EQ(o.l3_dir, "/x/cache");
    EXPECT_EQ(o.identity.kiln_version, KILN_VERSION);
  }
  {
    EnvGuard env({{"KILN_CACHE", "on"}, {"KILN_CACHE_DIR", nullptr}, {"KILN_L2_CACHE_DIR", nullptr},
                  {"XDG_CACHE_HOME", "/x/xdg"}});
    Options o = Options::from_env();
    EXPECT_EQ(o.l3_dir, "/x/xdg/kiln");
    if (fs::is_directory("/dev/shm")) {
      EXPECT_EQ(o.l2_dir, "/dev/shm/kiln-cache-" + std::to_string(::geteuid()));
    }
  }
  {
    EnvGuard env({{"KILN_CACHE", nullptr}, {"KILN_CACHE_DIR", nullptr}, {"XDG_CACHE_HOME", nullptr},
                  {"HOME", "/x/home"}});
    EXPECT_EQ(Options::from_env().l3_dir, "/x/home/.cache/kiln");
  }
  {
    EnvGuard env({{"KILN_CACHE", "off"}, {"KILN_CACHE_DIR", "/x/cache"}});
    Options o = Options::from_env();
    EXPECT_EQ(o.l2_dir, "");
    EXPECT_EQ(o.l3_dir, "");
    EXPECT_EQ(CompileCache(o).disabled_reason(CacheTier::l3), "KILN_CACHE=off");
  }
  {
    EnvGuard env({{"KILN_CACHE_MAX_SIZE", "2G"}, {"KILN_L2_CACHE_MAX_SIZE", "512 MiB"},
                  {"KILN_L1_CACHE_MAX_SIZE", "64M"}});
    Options o = Options::from_env();
    EXPECT_EQ(o.l3_max_bytes, int64_t(2) << 30);
    EXPECT_EQ(o.l2_max_bytes, int64_t(512) << 20);
    EXPECT_EQ(o.l1_max_bytes, int64_t(64) << 20);
  }
  {
    EnvGuard env({{"KILN_CACHE_MAX_SIZE", nullptr}, {"KILN_L2_CACHE_MAX_SIZE", nullptr},
                  {"KILN_L1_CACHE_MAX_SIZE", nullptr}});
    Options o = Options::from_env();
    EXPECT_EQ(o.l3_max_bytes, int64_t(5) << 30);
    EXPECT_EQ(o.l2_max_bytes, int64_t(1) << 30);
    EXPECT_EQ(o.l1_max_bytes, int64_t(256) << 20);
  }
  {  // L1 is bounded with the disk tiers off too
    EnvGuard env({{"KILN_CACHE", "off"}, {"KILN_L1_CACHE_MAX_SIZE", "1M"}});
    EXPECT_EQ(Options::from_env().l1_max_bytes, int64_t(1) << 20);
  }
  for (auto [value, says] : {std::pair{"lots", "KILN_CACHE_MAX_SIZE='lots' is not a size"},
                             std::pair{"0", "KILN_CACHE_MAX_SIZE='0' must be more than 0"}}) {
    EnvGuard env({{"KILN_CACHE_MAX_SIZE", value}});
    try {
      Options::from_env();
      ADD_FAILURE() << "accepted " << value;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  {
    EnvGuard env({{"KILN_CACHE", "sometimes"}});
    try {
      Options::from_env();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KILN_CACHE='sometimes' must be 'on' or 'off'"), std::string::npos);
    }
  }
}

TEST(CompileCacheEntry, RoundTripsAndChecksTheKey) {
  EntryIdentity id{"1.2.3", "gcc 12", "abc"};
  std::string payload("\0binary\xff payload", 16);
  std::string bytes = encode_entry(key(1), id, payload);
  DecodedEntry e = decode_entry(bytes, key(1), id);
  EXPECT_EQ(e.status, EntryStatus::ok);
  EXPECT_EQ(e.payload, payload);

  EntryHeader h = parse_header(bytes, id);
  EXPECT_EQ(h.status, EntryStatus::ok);
  EXPECT_EQ(h.key, key(1));
  EXPECT_EQ(h.identity.compiler, "gcc 12");
  EXPECT_EQ(h.payload_size, payload.size());

  e = decode_entry(bytes, key(2), id);
  EXPECT_EQ(e.status, EntryStatus::corrupt) << "a file renamed to another key is not trusted";
  EXPECT_EQ(decode_entry(bytes, key(1, "other_kind"), id).status, EntryStatus::corrupt);
  EXPECT_EQ(decode_entry(bytes, key(1), {"1.2.4", "gcc 12", "abc"}).status, EntryStatus::stale);
  EXPECT_EQ(decode_entry(bytes, key(1), {"1.2.3", "gcc 12", "abd"}).status, EntryStatus::stale);
  EXPECT_EQ(encode_entry(key(1), id, "").size(), h.header_size);
}

// The identity covers every kiln library, each by the build ID binutils
// reads from its file: a build that changes only the compiler (or the code
// generator, or an op) must not be served the old build's programs.
TEST(CompileCacheEntry, TheBuildIdentityCoversEveryKilnLibrary) {
  EntryIdentity id = build_identity();
  EXPECT_EQ(id.kiln_version, KILN_VERSION);
  EXPECT_FALSE(id.compiler.empty());
  EXPECT_EQ(id.build, kiln_build_id());
  EXPECT_EQ(id.build.size(), 16u);
  std::map<std::string, std::string> loaded;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        std::string path = info->dlpi_name ? info->dlpi_name : "";
        std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
        if (name.starts_with("libkiln_")) (*static_cast<std::map<std::string, std::string>*>(data))[name] = path;
        return 0;
      },
      &loaded);
  for (const char* library : {"libkiln_runtime.so", "libkiln_compiler.so", "libkiln_ir.so"})
    EXPECT_TRUE(loaded.count(library)) << library << " is not loaded by this test";
  std::map<std::string, std::string> ids(kiln_build_ids().begin(), kiln_build_ids().end());
  EXPECT_EQ(ids.size(), loaded.size());
  for (const auto& [name, path] : loaded) {
    FILE* p = ::popen(("readelf -n " + path + " 2>/dev/null").c_str(), "r");
    ASSERT_NE(p, nullptr);
    char line[512];
    std::string readelf_id;
    while (std::fgets(line, sizeof line, p)) {
      if (const char* at = std::strstr(line, "Build ID: ")) readelf_id = std::string(at + 10, std::strcspn(at + 10, "\n"));
    }
    ::pclose(p);
    EXPECT_FALSE(readelf_id.empty()) << path;
    EXPECT_EQ(ids[name], readelf_id) << path;
  }
}

}  // namespace
}  // namespace kiln
