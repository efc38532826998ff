#include "kiln/runtime/program_cache.h"

#include <cstdlib>
#include <mutex>

#include "kiln/base/lru_map.h"
#include "kiln/ir/fingerprint.h"
#include "kiln/runtime/compile_cache.h"

namespace kiln {
namespace {

struct FingerprintHash {
  size_t operator()(const ir::Fingerprint& f) const {
    return size_t(f.shapeless ^ (f.dims * 0x9e3779b97f4a7c15ull) ^ (f.options << 1));
  }
};

std::string options_text(const ProgramOptions& o) {
  std::string s = compiler::to_string(o.passes) + ";donate=";
  for (auto [in, out] : o.donations) s += std::to_string(in) + ">" + std::to_string(out) + ",";
  return s;
}

// L1 for programs holds ready Executables, not just their IR, under L1's
// bound: each weighs its optimized IR's size. An Executable that leaves it
// lives on while a caller holds it, and its queued runs need it no longer
// (executable.h). Never destroyed, so that no program is torn down while the
// process exits.
struct ReadyPrograms {
  std::mutex mu;
  LruMap<ir::Fingerprint, std::shared_ptr<const Executable>, FingerprintHash> map{
      CompileCache::instance().max_bytes(CacheTier::l1)};
};
ReadyPrograms& ready_programs() {
  static auto* r = new ReadyPrograms;
  return *r;
}

}  // namespace

ir::Fingerprint program_fingerprint(const ir::Graph& g, Device device,
                                    const ProgramOptions& options) {
  return ir::fingerprint(g, {to_string(device), options_text(options)});
}

compiler::PassOptions default_pass_options() {
  compiler::PassOptions o;
  const char* fusion = std::getenv("KILN_FUSION");
  if (fusion && std::string(fusion) == "0") o.fuse = false;
  return o;
}

std::shared_ptr<const Executable> get_executable(const ir::Graph& g, Device device,
                                                 const ProgramOptions& options) {
  const ir::Fingerprint fp = program_fingerprint(g, device, options);
  ReadyPrograms& ready = ready_programs();
  {
    std::lock_guard lock(ready.mu);
    if (auto* exe = ready.map.find(fp)) {
      CompileCache::instance().count_l1_hit("program");
      return *exe;
    }
  }
  std::string text = CompileCache::instance().get_or_compile({fp, "program"}, [&] {
    return ir::to_text(compiler::optimize(prepare_for_device(g, device), options.passes));
  });
  auto exe = std::make_shared<const Executable>(ir::parse_graph(text), device, options.donations,
                                                options.name);
  std::lock_guard lock(ready.mu);
  if (auto* first = ready.map.find(fp)) return *first;  // another thread built it meanwhile
  return ready.map.insert(fp, std::move(exe), int64_t(text.size()));
}

bool executable_cached(const ir::Graph& g, Device device, const ProgramOptions& options) {
  const ir::Fingerprint fp = program_fingerprint(g, device, options);
  {
    ReadyPrograms& ready = ready_programs();
    std::lock_guard lock(ready.mu);
    if (ready.map.contains(fp)) return true;
  }
  return CompileCache::instance().has({fp, "program"});
}

}  // namespace kiln
