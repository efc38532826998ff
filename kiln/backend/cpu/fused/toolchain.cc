#include "kiln/backend/cpu/fused/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  KILN_CHECK(f.good(), "fused kernel: cannot write ", path);
}

// The compilers running and the directories in use. A process that exits
// while a build runs in the background (whose result it can no longer use)
// stops the compiler and leaves no files behind.
class Live {
 public:
  static Live& get() {
    static Live* live = new Live;  // never destroyed: used during exit
    return *live;
  }
  void add_dir(const std::string& d) {
    std::lock_guard lock(mu_);
    dirs_.insert(d);
  }
  void remove_dir(const std::string& d) {
    std::lock_guard lock(mu_);
    std::error_code ec;
    fs::remove_all(d, ec);
    dirs_.erase(d);
  }
  void add_group(pid_t pgid) {
    std::lock_guard lock(mu_);
    if (exiting_) kill(-pgid, SIGTERM);
    groups_.insert(pgid);
  }
  void remove_group(pid_t pgid) {
    std::lock_guard lock(mu_);
    groups_.erase(pgid);
  }
  bool exiting() {
    std::lock_guard lock(mu_);
    return exiting_;
  }
  void shut_down() {
    std::lock_guard lock(mu_);
    exiting_ = true;
    for (pid_t g : groups_) kill(-g, SIGTERM);  // gcc then deletes its temporary files
    std::error_code ec;
    for (const std::string& d : dirs_) fs::remove_all(d, ec);
  }

 private:
  std::mutex mu_;
  std::set<std::string> dirs_;
  std::set<pid_t> groups_;
  bool exiting_ = false;
};

struct ShutDownAtExit {
  ~ShutDownAtExit() { Live::get().shut_down(); }
} shut_down_at_exit;

// A fresh private directory, removed with everything in it when destroyed.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = cat(tmp && *tmp ? tmp : "/tmp", "/kiln-fused-XXXXXX");
    KILN_CHECK(mkdtemp(pattern.data()), "fused kernel: cannot create a directory like ", pattern,
               ": ", std::strerror(errno), "; set TMPDIR to a writable directory");
    path_ = pattern;
    Live::get().add_dir(path_);
  }
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
  write_file(src, source);
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
  write_file(path, bytes);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  KILN_CHECK(handle, "fused kernel: cannot load a generated kernel: ", dlerror());
  return std::shared_ptr<SharedObject>(new SharedObject(handle));
}

SharedObject::~SharedObject() { dlclose(handle_); }

void* SharedObject::symbol(const char* name) const { return dlsym(handle_, name); }

}  // namespace kiln::cpu::fused
