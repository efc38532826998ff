#include "kiln/backend/cpu/fused/fused_kernel.h"

#include <xxhash.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kiln/backend/cpu/fused/codegen.h"
#include "kiln/backend/cpu/fused/driver.h"
#include "kiln/backend/cpu/fused/interpreter.h"
#include "kiln/backend/cpu/fused/plan.h"
#include "kiln/backend/cpu/fused/toolchain.h"
#include "kiln/base/error.h"
#include "kiln/codegen/expr.h"
#include "kiln/ir/fingerprint.h"
#include "kiln/runtime/compile_cache.h"
#include "kiln/runtime/compile_pool.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cpu::fused {
namespace {

std::atomic<int64_t> g_interpreted{0}, g_generated{0}, g_builds{0}, g_loads{0}, g_failures{0};

CodegenMode env_mode() {
  const char* env = std::getenv("KILN_FUSED_CODEGEN");
  std::string s = env ? env : "";
  if (s.empty() || s == "1" || s == "on" || s == "async") return CodegenMode::async;
  if (s == "0" || s == "off") return CodegenMode::off;
  if (s == "sync") return CodegenMode::sync;
  fail("KILN_FUSED_CODEGEN=", s, " is not valid; use 1/on/async (generate code in the background), ",
       "0/off (interpret fused kernels) or sync (wait for generated code)");
}

// -1: the environment's mode; else a CodegenMode.
std::atomic<int> g_mode_override{-1};

void warn_once(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "kiln: generating code for a fused kernel failed; such kernels run interpreted "
                 "(slower). KILN_FUSED_CODEGEN=0 silences this. Why:\n%s\n",
                 why.c_str());
  });
}

class FusedKernel {
 public:
  FusedKernel(const std::string& body, const std::string& kind)
      : plan_(codegen::make_plan(body, kind)), interpreter_(plan_), constants_(codegen::full_constants(plan_)) {}

  void run(std::span<const TensorRef> in, std::span<const TensorRef> out) {
    Binding b = bind(plan_, in, out);
    const CodegenMode mode = codegen_mode();
    if (mode != CodegenMode::off) start(mode);
    if (mode != CodegenMode::off && state_.load(std::memory_order_acquire) == CodegenState::ready &&
        b.space == plan_.natural) {
      ++g_generated;
      execute(
          plan_, b,
          [&](int64_t begin, int64_t end) { eval_(b.data.data(), constants_.data(), begin, end); },
          [&](int64_t ib, int64_t ie, auto* dst, const auto&) {
            fold_(b.data.data(), constants_.data(), ib, ie, dst);
          });
      return;
    }
    ++g_interpreted;
    interpreter_.run(b);
  }

  // Starts the build in the background, unless codegen is off; a sync-mode
  // call then waits for this build.
  void prepare() {
    if (codegen_mode() != CodegenMode::off) start(CodegenMode::async);
  }

  CodegenStatus status() {
    std::lock_guard lock(mu_);
    return {state_.load(), error_, ready_at_};
  }

  CodegenStatus wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return state_.load() != CodegenState::pending; });
    return {state_.load(), error_, ready_at_};
  }

 private:
  // Starts the build once: in the background, or now for sync mode, which
  // then also waits for a build already started and raises its failure.
  void start(CodegenMode mode) {
    std::call_once(started_, [&] {
      state_.store(CodegenState::pending);
      if (mode == CodegenMode::sync) build();
      else submit_compile_job([this] { build(); });
    });
    if (mode != CodegenMode::sync) return;
    CodegenStatus s = wait(std::chrono::hours(24));
    KILN_CHECK(s.state != CodegenState::failed, s.error);
  }

  ir::Fingerprint cache_fingerprint(const std::string& source) const {
    uint64_t h = XXH64(source.data(), source.size(), 0);
    return ir::fingerprint(plan_.graph, {"cpu", cat("fused codegen | ", toolchain().identity(),
                                                    " | source ", h)});
  }

  void build() {
    try {
      std::string source = generate_source(plan_);
      CacheKey key{cache_fingerprint(source), "cpu_fused_so"};
      std::string bytes = CompileCache::instance().get_or_compile(key, [&] {
        ++g_builds;
        return build_shared_object(source);
      });
      auto so = SharedObject::load(bytes);
      ++g_loads;
      const char* name = plan_.reduction ? kFoldSymbol : kEvalSymbol;
      void* fn = so->symbol(name);
      KILN_CHECK(fn, "fused kernel: the generated object has no symbol ", name);
      std::lock_guard lock(mu_);
      so_ = std::move(so);
      if (plan_.reduction) fold_ = reinterpret_cast<FoldFn>(fn);
      else eval_ = reinterpret_cast<EvalFn>(fn);
      ready_at_ = std::chrono::steady_clock::now();
      state_.store(CodegenState::ready, std::memory_order_release);
    } catch (const std::exception& e) {
      ++g_failures;
      std::lock_guard lock(mu_);
      error_ = e.what();
      state_.store(CodegenState::failed, std::memory_order_release);
      if (codegen_mode() != CodegenMode::sync && !exiting()) warn_once(error_);
    }
    cv_.notify_all();
  }

  const Plan plan_;
  const Interpreter interpreter_;
  const std::vector<uint64_t> constants_;

  std::once_flag started_;
  std::atomic<CodegenState> state_{CodegenState::none};
  std::mutex mu_;  // guards the fields below while a build runs
  std::condition_variable cv_;
  std::shared_ptr<SharedObject> so_;
  EvalFn eval_ = nullptr;
  FoldFn fold_ = nullptr;
  std::string error_;
  std::chrono::steady_clock::time_point ready_at_;
};

// One kernel per (kind, body); never freed (background builds refer to them).
std::shared_ptr<FusedKernel> kernel_for(const std::string& body, const std::string& kind,
                                        bool create) {
  static std::mutex mu;
  static auto* kernels = new std::unordered_map<std::string, std::shared_ptr<FusedKernel>>;
  std::string key = kind + "\n" + body;
  std::lock_guard lock(mu);
  auto it = kernels->find(key);
  if (it != kernels->end()) return it->second;
  if (!create) return nullptr;
  auto k = std::make_shared<FusedKernel>(body, kind);
  kernels->emplace(std::move(key), k);
  return k;
}

std::string kind_of(const ir::Attrs& attrs) {
  return attrs.has("kind") ? attrs.s("kind") : std::string("elementwise");
}

void fused_kernel(const KernelArgs& a) {
  kernel_for(a.attrs.s("body"), kind_of(a.attrs), true)->run(a.in, a.out);
}

void prepare_fused(const PrepareArgs& a) { kernel_for(a.attrs.s("body"), kind_of(a.attrs), true)->prepare(); }

const KernelRegistrar registrations[] = {{DeviceKind::cpu, "fused", {fused_kernel, true, prepare_fused}}};

}  // namespace

CodegenMode codegen_mode() {
  int o = g_mode_override.load();
  if (o >= 0) return CodegenMode(o);
  static const CodegenMode mode = env_mode();
  return mode;
}

void set_codegen_mode(std::optional<CodegenMode> mode) {
  g_mode_override.store(mode ? int(*mode) : -1);
}

CodegenStatus codegen_status(const std::string& body, const std::string& kind) {
  auto k = kernel_for(body, kind, false);
  return k ? k->status() : CodegenStatus{};
}

CodegenStatus wait_for_codegen(const std::string& body, const std::string& kind,
                               std::chrono::milliseconds timeout) {
  auto k = kernel_for(body, kind, false);
  return k ? k->wait(timeout) : CodegenStatus{};
}

FusedStats fused_stats() {
  return {g_interpreted.load(), g_generated.load(), g_builds.load(), g_loads.load(), g_failures.load()};
}

}  // namespace kiln::cpu::fused
