// compile(fn): traces a C++ function of tensors into one graph per input
// signature (dtypes, shapes, device and a caller-supplied key for
// non-tensor arguments), optimizes and lowers it through the compile cache,
// and returns a callable that runs the compiled program. Functions that call
// value_and_grad compile forward and backward into one program.
//
// Tensors the function reads from its closure are baked in as constants
// when it is traced: pass everything that changes between calls as an
// argument. Values cannot be read inside the function (item() raises).
//
// Collectives: unless the call is SPMD-safe (CompileOptions::spmd_safe, or
// an SpmdSafeGuard alive at the call), a graph with collectives runs as
// skinny collectives (spmd.h, segmented_program.h): the segments between
// them and each collective are separate programs. SPMD-safe: one program.
// CompileOptions::graph_split splits it further, at the model's layers.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/runtime/program_cache.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

struct CompileOptions {
  std::string name = "compiled function";  // used in recompilation reports
  // Arguments whose buffers the outputs may reuse (each is matched with the
  // first output of the same type). A donated argument must not be used
  // after the call.
  std::vector<int> donate;
  compiler::PassOptions passes = default_pass_options();
  // Collectives stay inside the one program even outside an SpmdSafeGuard.
  bool spmd_safe = false;
  // Graph split (segmented_program.h): the model's forward and backward run
  // as separately compiled programs, a pair per group of this many layers
  // (0: one pair for all layers). nullopt: no split.
  std::optional<int64_t> graph_split;
  // A signature whose programs are in no cache tier compiles on the compile
  // pool (compile_pool.h); until it is ready each call runs the traced graph
  // op by op in strict eager mode, which gives the same bits, so a first
  // call never waits for the compiler. Off: the first call compiles.
  bool compile_in_background = false;
  // The programs' runs are replayed ones (executable.h): recorded once per
  // set of input buffers, a CUDA graph on CUDA, and replayed.
  bool replay = false;
};

class CompiledFunction {
 public:
  CompiledFunction(TensorFn fn, CompileOptions options);
  // `static_key` distinguishes calls whose non-tensor arguments differ.
  // Arguments moved in are given up as the call goes: while the program
  // builds in the background, each at its last read in the eager run.
  std::vector<Tensor> operator()(std::vector<Tensor> args, const std::string& static_key = "");

  size_t num_signatures() const { return entries_.size(); }
  // The program compiled for the most recent signature (an error when it
  // was split into segments: see last_programs); waits for a build still
  // running in the background.
  const Executable& last_executable() const;
  // The programs the most recent signature runs, in order: one, or its
  // segments (skinny collectives, graph split).
  std::vector<const Executable*> last_programs() const;

 private:
  struct Entry;
  Entry& entry_for(const std::vector<Tensor>& args, const std::string& signature);
  bool safe_call() const;  // this call keeps collectives inside one program

  TensorFn fn_;
  CompileOptions options_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::shared_ptr<Entry> last_;
};

CompiledFunction compile(TensorFn fn, CompileOptions options = {});

class Recording;
// Traces `fn` without running anything: graph inputs 0..n-1 are
// placeholders of `types` on `device` (the recording's captured[i] is left
// empty for them); tensors fn reads from its closure become further inputs,
// captured. The graph's outputs are fn's results.
std::shared_ptr<Recording> trace(const TensorFn& fn, const std::vector<ir::TypeInfo>& types,
                                 Device device);
// The types of `tensors`, for trace().
std::vector<ir::TypeInfo> types_of(const std::vector<Tensor>& tensors);

}  // namespace kiln
