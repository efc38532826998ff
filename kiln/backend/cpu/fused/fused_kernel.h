// The CPU kernel of op "fused" (registered with strided inputs), the
// compiler-made fused groups of kiln/compiler/fuse.h; the hand-written fused
// kernels are kiln/backend/cpu/<op>.cc.
//
// The first call of a body plans it, starts building generated code for it
// on a background thread pool (runtime/compile_pool.h; a compiled program
// starts it earlier, from the kernel's prepare hook, runtime/kernel.h) and
// runs the interpreter; calls after the
// shared object is ready run the generated code (when the buffers have the
// natural layout it was generated for; otherwise the interpreter). Both give
// the same bits as running the body's nodes unfused. Built objects go
// through the compile cache (kiln/runtime/compile_cache.h, kind
// "cpu_fused_so"), keyed by the body, the generated source, the compiler and
// its flags and the CPU, so later processes load them instead of compiling.
//
// KILN_FUSED_CODEGEN: unset, 1, on or async: as above; 0 or off: always the
// interpreter; sync: the first call waits for the compiler (tests).
// KILN_FUSED_COMPILE_THREADS: the pool's size (default: a quarter of the
// hardware threads, 1 to 4).
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace kiln::cpu::fused {

enum class CodegenMode { off, async, sync };
// KILN_FUSED_CODEGEN (read once; a bad value is a kiln::Error naming the
// valid ones), unless overridden.
CodegenMode codegen_mode();
// Overrides the mode for the process (tests, benchmarks); nullopt restores
// the environment's.
void set_codegen_mode(std::optional<CodegenMode> mode);

enum class CodegenState { none, pending, ready, failed };
struct CodegenStatus {
  CodegenState state = CodegenState::none;
  std::string error;  // for failed
  std::chrono::steady_clock::time_point ready_at;  // for ready: when it became usable
};

// The generated code's state for the body of a fused node with these
// attributes (none: the body has not run yet, or ran with codegen off).
CodegenStatus codegen_status(const std::string& body, const std::string& kind);
// Waits up to `timeout` for a pending build to finish.
CodegenStatus wait_for_codegen(const std::string& body, const std::string& kind,
                               std::chrono::milliseconds timeout);

// Counts since the process started.
struct FusedStats {
  int64_t interpreted = 0;  // kernel calls run by the interpreter
  int64_t generated = 0;    // kernel calls run by generated code
  int64_t builds = 0;       // shared objects built by the compiler (cache misses)
  int64_t loads = 0;        // shared objects loaded (built or from the cache)
  int64_t failures = 0;     // bodies whose code generation failed
};
FusedStats fused_stats();

}  // namespace kiln::cpu::fused
