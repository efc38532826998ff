#include "kiln/runtime/program_cache.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>

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

ir::Fingerprint program_fingerprint(const ir::Graph& g, Device device, const ProgramOptions& options) {
  return ir::fingerprint(g, {to_string(device), options_text(options)});
}

// L1 for programs holds ready Executables, not just their IR.
// Never destroyed: queued programs may still run while the process exits.
struct ReadyPrograms {
  std::mutex mu;
  std::unordered_map<ir::Fingerprint, std::shared_ptr<const Executable>, FingerprintHash> map;
};
ReadyPrograms& ready_programs() {
  static auto* r = new ReadyPrograms;
  return *r;
}

}  // namespace

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
    auto it = ready.map.find(fp);
    if (it != ready.map.end()) {
      CompileCache::instance().count_l1_hit("program");
      return it->second;
    }
  }
  std::string text = CompileCache::instance().get_or_compile({fp, "program"}, [&] {
    return ir::to_text(compiler::optimize(prepare_for_device(g, device), options.passes));
  });
  auto exe = std::make_shared<const Executable>(ir::parse_graph(text), device, options.donations,
                                                options.name);
  std::lock_guard lock(ready.mu);
  return ready.map.emplace(fp, std::move(exe)).first->second;
}

bool executable_cached(const ir::Graph& g, Device device, const ProgramOptions& options) {
  const ir::Fingerprint fp = program_fingerprint(g, device, options);
  {
    ReadyPrograms& ready = ready_programs();
    std::lock_guard lock(ready.mu);
    if (ready.map.count(fp)) return true;
  }
  return CompileCache::instance().has({fp, "program"});
}

}  // namespace kiln
