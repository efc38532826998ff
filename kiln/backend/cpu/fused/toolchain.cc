#include "kiln/backend/cpu/fused/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>

#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/base/error.h"
#include "kiln/base/process.h"

extern char** environ;

namespace kiln::cpu::fused {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The compilers running and the directories in use. A process that exits
// while a build runs in the background (whose result it can no longer use)
// stops the compiler and leaves no files behind: directories are made and
// files written under the lock, and none once the exit has begun, so the
// exit's cleanup never races a writer.
class Live {
 public:
  static Live& get() {
    static Live* live = new Live;  // never destroyed: used during exit
    return *live;
  }
  std::string make_dir() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string parent = tmp && *tmp ? tmp : "/tmp";
    std::string pattern = cat(parent, "/", kDirPrefix, getpid(), "-XXXXXX");
    std::lock_guard lock(mu_);
    check_not_exiting();
    if (!swept_) {
      swept_ = true;
      remove_dirs_of_killed_processes(parent);
    }
    std::string path = pattern;  // mkdtemp fills in the X's
    KILN_CHECK(mkdtemp(path.data()), "fused kernel: cannot create a directory like ", pattern,
               ": ", std::strerror(errno), "; set TMPDIR to a writable directory");
    dirs_.insert(path);
    return path;
  }
  void remove_dir(const std::string& d) {
    std::lock_guard lock(mu_);
    std::error_code ec;
    fs::remove_all(d, ec);
    dirs_.erase(d);
  }
  void write_file(const std::string& path, const std::string& bytes) {
    std::lock_guard lock(mu_);
    check_not_exiting();
    std::ofstream f(path, std::ios::binary);
    f << bytes;
    f.close();
    KILN_CHECK(f.good(), "fused kernel: cannot write ", path);
  }
  void add_group(pid_t pgid) {
    std::lock_guard lock(mu_);
    if (exiting_) kill(-pgid, SIGTERM);
    groups_.insert(pgid);
  }
  void remove_group(pid_t pgid) {
    std::lock_guard lock(mu_);
    groups_.erase(pgid);
    group_ended_.notify_all();
  }
  bool exiting() {
    std::lock_guard lock(mu_);
    return exiting_;
  }
  void shut_down() {
    std::unique_lock lock(mu_);
    exiting_ = true;
    for (pid_t g : groups_) kill(-g, SIGTERM);  // gcc then deletes its temporary files
    // A stopped compiler may still be writing: wait (a little) until it is gone.
    group_ended_.wait_for(lock, std::chrono::seconds(5), [&] { return groups_.empty(); });
    std::error_code ec;
    for (const std::string& d : dirs_) fs::remove_all(d, ec);
  }

 private:
  void check_not_exiting() const {
    KILN_CHECK(!exiting_, "fused kernel: not built, the process is exiting");
  }
  // A process killed outright (SIGKILL: a scheduler's preemption, the OOM
  // killer) cannot clean up: the first build of a later process removes
  // what such processes left in `parent`. Only directories untouched for
  // 10 minutes go, as `pid` may name a live process of another PID
  // namespace sharing the folder; no build takes that long.
  static void remove_dirs_of_killed_processes(const std::string& parent) {
    std::error_code ec;
    const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(10);
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with(kDirPrefix)) continue;
      pid_t pid = 0;
      const char* digits = name.c_str() + std::strlen(kDirPrefix);
      const auto [after, parse_ec] = std::from_chars(digits, name.c_str() + name.size(), pid);
      if (parse_ec != std::errc() || *after != '-' || pid <= 0 || process_alive(pid)) continue;
      std::error_code stat_ec;
      if (fs::last_write_time(it->path(), stat_ec) < old && !stat_ec) fs::remove_all(it->path(), stat_ec);
    }
  }

  static constexpr const char* kDirPrefix = "kiln-fused-";

  std::mutex mu_;
  std::condition_variable group_ended_;
  std::set<std::string> dirs_;
  std::set<pid_t> groups_;
  bool exiting_ = false;
  bool swept_ = false;
};

struct ShutDownAtExit {
  ~ShutDownAtExit() { Live::get().shut_down(); }
} shut_down_at_exit;

// A fresh private directory, removed with everything in it when destroyed.
class TempDir {
 public:
  TempDir() : path_(Live::get().make_dir()) {}
  ~TempDir() { Live::get().remove_dir(path_); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs argv in `dir` (its temporary files go there too, as TMPDIR) with
// stdout and stderr going to `log`; returns the exit status. The command
// runs in a process group of its own (the compiler driver and the programs
// it starts), which an exiting process stops.
int run(const std::vector<std::string>& argv, const TempDir& dir, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string tmpdir = "TMPDIR=" + dir.path();
  std::vector<char*> env{tmpdir.data()};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "TMPDIR=", 7) != 0) env.push_back(*e);
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid;
  int err = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  KILN_CHECK(err == 0, "fused kernel: cannot run the C++ compiler '", argv[0], "': ",
             std::strerror(err), "; install one or set KILN_CXX (KILN_FUSED_CODEGEN=0 turns ",
             "code generation off)");
  Live::get().add_group(pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  Live::get().remove_group(pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string cpu_identity() {
  std::ifstream f("/proc/cpuinfo");
  std::string flags;
  for (std::string line; std::getline(f, line);)
    if (line.rfind("flags", 0) == 0) {
      flags = line;
      break;
    }
  return cat(cpu_model(), " flags:", std::hash<std::string>{}(flags));
}

Toolchain probe() {
  Toolchain t;
  const char* cxx = std::getenv("KILN_CXX");
  t.cxx = cxx && *cxx ? cxx : "c++";
  // The library's own value flags (CMakeLists.txt), for the same bits.
  t.flags = {"-std=c++20",         "-O3",         "-march=native",      "-fPIC",
             "-shared",            "-fopenmp-simd", "-ffp-contract=off", "-fno-math-errno",
             "-fno-trapping-math", "-fvisibility=hidden", "-pipe"};
  TempDir dir;
  std::string log = dir.file("version.txt");
  int rc = run({t.cxx, "--version"}, dir, log);
  std::string out = read_file(log);
  KILN_CHECK(rc == 0, "fused kernel: '", t.cxx, " --version' failed (exit ", rc, "): ", out);
  t.version = out.substr(0, out.find('\n'));
  t.cpu = cpu_identity();
  return t;
}

}  // namespace

bool exiting() { return Live::get().exiting(); }

std::string Toolchain::identity() const {
  std::string s = cat(cxx, " | ", version, " |");
  for (const std::string& f : flags) s += " " + f;
  return s + " | " + cpu;
}

const Toolchain& toolchain() {
  static const Toolchain* t = new Toolchain(probe());  // never destroyed: builds run during exit
  return *t;
}

std::string build_shared_object(const std::string& source) {
  const Toolchain& t = toolchain();
  TempDir dir;
  std::string src = dir.file("kernel.cc"), so = dir.file("kernel.so"), log = dir.file("log.txt");
  Live::get().write_file(src, source);
  std::vector<std::string> argv{t.cxx};
  argv.insert(argv.end(), t.flags.begin(), t.flags.end());
  argv.insert(argv.end(), {src, "-o", so});
  int rc = run(argv, dir, log);
  if (rc != 0) {
    std::string diag = read_file(log);
    if (diag.size() > 4000) diag = diag.substr(0, 4000) + "\n...";
    fail("fused kernel: the C++ compiler failed (exit ", rc, ") on generated code:\n", diag);
  }
  return read_file(so);
}

std::shared_ptr<SharedObject> SharedObject::load(const std::string& bytes) {
  // dlopen needs a file: a private temporary one, unlinked once loaded.
  TempDir dir;
  std::string path = dir.file("kernel.so");
  Live::get().write_file(path, bytes);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  KILN_CHECK(handle, "fused kernel: cannot load a generated kernel: ", dlerror());
  return std::shared_ptr<SharedObject>(new SharedObject(handle));
}

SharedObject::~SharedObject() { dlclose(handle_); }

void* SharedObject::symbol(const char* name) const { return dlsym(handle_, name); }

}  // namespace kiln::cpu::fused
