#include "kiln/backend/nccl/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "kiln/base/error.h"

namespace kiln::nccl {
namespace {

[[noreturn]] void fail_call(const Library& l, ncclResult_t result, const char* what) {
  const char* last = l.get_last_error(nullptr);
  fail("NCCL: ", what, " failed: ", l.get_error_string(result),
       last && *last ? cat(" (", last, ")") : std::string());
}

template <class F>
void bind(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  KILN_CHECK(fn, "NCCL: the loaded library has no ", name, " (kiln needs NCCL 2.18 or newer)");
}

Library load() {
  const char* override_path = std::getenv("KILN_NCCL_LIBRARY");
  const char* path = override_path && *override_path ? override_path : "libnccl.so.2";
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  KILN_CHECK(handle, "NCCL is needed for collectives on GPUs and ", path,
             " could not be loaded (", dlerror(), "): install NCCL 2 (Debian/Ubuntu: libnccl2 "
             "from NVIDIA's CUDA repository; pip: nvidia-nccl-cu13) so the loader finds it, "
             "or set KILN_NCCL_LIBRARY to the library's path");
  Library l{};
  bind(handle, "ncclGetVersion", l.get_version);
  bind(handle, "ncclGetUniqueId", l.get_unique_id);
  bind(handle, "ncclCommInitRank", l.comm_init_rank);
  bind(handle, "ncclCommSplit", l.comm_split);
  bind(handle, "ncclCommAbort", l.comm_abort);
  bind(handle, "ncclCommDestroy", l.comm_destroy);
  bind(handle, "ncclCommGetAsyncError", l.comm_get_async_error);
  bind(handle, "ncclGetErrorString", l.get_error_string);
  bind(handle, "ncclGetLastError", l.get_last_error);
  bind(handle, "ncclGroupStart", l.group_start);
  bind(handle, "ncclGroupEnd", l.group_end);
  bind(handle, "ncclSend", l.send);
  bind(handle, "ncclRecv", l.recv);
  bind(handle, "ncclBroadcast", l.broadcast);
  bind(handle, "ncclAllGather", l.all_gather);
  int v = 0;
  if (ncclResult_t r = l.get_version(&v); r != ncclSuccess) fail_call(l, r, "ncclGetVersion");
  l.version = cat("NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100);
  return l;
}

}  // namespace

const Library& library() {
  // Never destroyed: a thread left in a joint setup step, or a group's
  // poller, may call NCCL while the process exits.
  static std::once_flag once;
  static auto* lib = new Library{};
  static auto* error = new std::string;
  std::call_once(once, [] {
    try {
      *lib = load();
    } catch (const Error& e) {
      *error = e.what();
    }
  });
  KILN_CHECK(error->empty(), *error);
  return *lib;
}

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) fail_call(library(), result, what);
}

}  // namespace kiln::nccl
