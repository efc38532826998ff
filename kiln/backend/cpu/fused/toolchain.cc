#include "kiln/backend/cpu/fused/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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

// A fresh private directory, removed with everything in it when destroyed.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = cat(tmp && *tmp ? tmp : "/tmp", "/kiln-fused-XXXXXX");
    KILN_CHECK(mkdtemp(pattern.data()), "fused kernel: cannot create a directory like ", pattern,
               ": ", std::strerror(errno), "; set TMPDIR to a writable directory");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs argv with stdout and stderr going to `log`; returns the exit status.
int run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  KILN_CHECK(err == 0, "fused kernel: cannot run the C++ compiler '", argv[0], "': ",
             std::strerror(err), "; install one or set KILN_CXX (KILN_FUSED_CODEGEN=0 turns ",
             "code generation off)");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    KILN_CHECK(errno == EINTR, "fused kernel: waiting for the compiler failed: ", std::strerror(errno));
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
  t.flags = {"-std=c++20",      "-O3",         "-march=native",        "-fPIC",
             "-shared",         "-fopenmp-simd", "-ffp-contract=off", "-fno-math-errno",
             "-fvisibility=hidden"};
  TempDir dir;
  std::string log = dir.file("version.txt");
  int rc = run({t.cxx, "--version"}, log);
  std::string out = read_file(log);
  KILN_CHECK(rc == 0, "fused kernel: '", t.cxx, " --version' failed (exit ", rc, "): ", out);
  t.version = out.substr(0, out.find('\n'));
  t.cpu = cpu_identity();
  return t;
}

}  // namespace

std::string Toolchain::identity() const {
  std::string s = cat(cxx, " | ", version, " |");
  for (const std::string& f : flags) s += " " + f;
  return s + " | " + cpu;
}

const Toolchain& toolchain() {
  static const Toolchain t = probe();
  return t;
}

std::string build_shared_object(const std::string& source) {
  const Toolchain& t = toolchain();
  TempDir dir;
  std::string src = dir.file("kernel.cc"), so = dir.file("kernel.so"), log = dir.file("log.txt");
  write_file(src, source);
  std::vector<std::string> argv{t.cxx};
  argv.insert(argv.end(), t.flags.begin(), t.flags.end());
  argv.insert(argv.end(), {src, "-o", so});
  int rc = run(argv, log);
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
