// NCCL, loaded when the first NCCL process group is made (dlopen of
// libnccl.so.2), not linked: kiln starts and trains on one device on
// machines without it, and the library (hundreds of MiB) need not ship with
// kiln. Its functions are nccl.h's, called through this table.
#pragma once
#include <nccl.h>

#include <string>

namespace kiln::nccl {

struct Library {
  decltype(&::ncclGetVersion) get_version;
  decltype(&::ncclGetUniqueId) get_unique_id;
  decltype(&::ncclCommInitRank) comm_init_rank;
  decltype(&::ncclCommSplit) comm_split;
  decltype(&::ncclCommAbort) comm_abort;
  decltype(&::ncclCommDestroy) comm_destroy;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error;
  decltype(&::ncclGetErrorString) get_error_string;
  decltype(&::ncclGetLastError) get_last_error;
  decltype(&::ncclGroupStart) group_start;
  decltype(&::ncclGroupEnd) group_end;
  decltype(&::ncclSend) send;
  decltype(&::ncclRecv) recv;
  decltype(&::ncclBroadcast) broadcast;
  decltype(&::ncclAllGather) all_gather;
  std::string version;  // "NCCL 2.28.9"
};

// The loaded library; a kiln::Error saying what to install when it is not
// found ($KILN_NCCL_LIBRARY names another file).
const Library& library();

// Throws a kiln::Error for a failed call: `what` (the call), NCCL's error
// string and its last error message.
void check(ncclResult_t result, const char* what);

}  // namespace kiln::nccl
