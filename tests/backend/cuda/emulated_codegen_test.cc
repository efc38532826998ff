// CUDA's generated kernels (kiln/backend/cuda/fused/codegen.h) run on the
// CPU, so that their logic is checked where there is no GPU: each source,
// as the host generates it for a call, is built as host C++ over
// tests/backend/cuda/emulated.h and run with the argument words and the
// launches the host makes for that call (make_call), over host buffers.
// That covers what the generated code adds to the CPU's expressions: the
// argument struct the host and the kernel share, positions and strides
// (broadcast, transposed, the shape-generic layout words), the grid-stride
// loop, the row and column walks of reductions, their two passes over long
// rows, the fold tree and the mean's division, over the bodies of random
// graphs and of the debug models' training steps. fused_cuda_test checks the
// same on a GPU; not checked here: CUDA's math library (the host's runs
// instead, so elementwise results must be the CPU's bits), the code NVRTC
// makes (nvrtc_codegen_test compiles every kind), speed.
//
// Selections (max, min), casts, integers and every elementwise result must
// be the CPU's bits. Sums fold in another order than the CPU's: within
// tolerance(dtype) * (|cpu| + sum of |x|). The two variants of a kernel
// (specialised, shape-generic) must give the same bits.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/backend/cuda/fused/codegen.h"
#include "kiln/base/error.h"
#include "kiln/codegen/expr.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/data/loader.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/models/config.h"
#include "kiln/models/transformer.h"
#include "kiln/optim/adamw.h"
#include "kiln/runtime/tensor.h"
#include "kiln/train/step.h"
#include "tests/backend/cuda/codegen_cases.h"
#include "tests/support/spread_values.h"

namespace kiln::cuda::fused {
namespace {

namespace fs = std::filesystem;
using test::element_bytes;
using test::spread_tensor;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// One call of a body's kernels: its plan, the generated source and what the
// host launches, over host buffers (the inputs' and fresh outputs').
struct PendingCall {
  codegen::Plan plan;
  std::vector<std::vector<uint8_t>> buffers;  // inputs, then outputs (kUnwritten at first)
  std::vector<uint8_t> partials;
  Call call;
  std::string source;
};

// The pattern unwritten outputs hold: 0x5a bytes (f32 1.5e16, i32 1.5e9).
constexpr uint8_t kUnwritten = 0x5a;

// The generated sources of many calls built as one host shared object: the
// embedded headers once, then each source's kernels in a namespace of their
// own, and one entry point that runs kernel `symbol` of source `i` over a
// grid with the argument words, checking that they fill its KilnArgs.
class HostBuild {
 public:
  explicit HostBuild(const std::vector<const PendingCall*>& calls) {
    const std::string headers(embedded_headers());
    std::ostringstream tu, entry;
    tu << "#include \"tests/backend/cuda/emulated.h\"\n#include <cstring>\n"
       << "// One array per block, which every thread of the block shares.\n"
       << "#undef __shared__\n#define __shared__ static\n"
       << headers << "\n";
    entry << "template <class Args>\n"
          << "int kiln_run(void (*k)(const Args), unsigned blocks, int x, int y, const uint64_t* w, size_t n) {\n"
          << "  if (n * 8 != sizeof(Args)) return int(sizeof(Args) / 8);\n"
          << "  Args a;\n  std::memcpy(&a, w, sizeof a);\n"
          << "  kiln::cuda::emulated::launch(dim3(blocks), dim3(unsigned(x), unsigned(y)), 0, k, a);\n"
          << "  return -1;\n}\n\n"
          << "extern \"C\" int kiln_emulated(int i, const char* symbol, unsigned blocks, int x, int y,\n"
          << "                               const uint64_t* w, size_t n) {\n";
    for (size_t i = 0; i < calls.size(); ++i) {
      std::string src = calls[i]->source;
      const size_t at = src.find(headers);
      KILN_CHECK(at != std::string::npos, "a generated source without the embedded headers");
      src.erase(at, headers.size());
      // Kernels of one name in several namespaces: C++ linkage, not C's.
      for (size_t p; (p = src.find("extern \"C\" ")) != std::string::npos;) src.erase(p, 11);
      tu << "namespace k" << i << " {\n" << src << "}  // namespace k" << i << "\n\n";
      for (const char* symbol : {kEvalSymbol, kFoldSymbol, kCombineSymbol})
        if (src.find(cat(" ", symbol, "(const KilnArgs a)")) != std::string::npos)
          entry << "  if (i == " << i << " && !std::strcmp(symbol, \"" << symbol << "\")) return kiln_run(k" << i
                << "::" << symbol << ", blocks, x, y, w, n);\n";
    }
    entry << "  return -2;\n}\n";
    tu << entry.str();
    load(tu.str());
  }

  // Runs the launches of a call (source `i` of the build).
  void run(int i, PendingCall& c) const {
    for (const Call::Grid& g : c.call.grids) {
      // The elementwise kernel is a grid-stride loop: at most 3 blocks, so
      // that threads walk it more than once (and the emulation stays quick).
      const int64_t blocks = g.symbol == kEvalSymbol ? std::min<int64_t>(g.blocks, 3) : g.blocks;
      const int r = entry_(i, g.symbol, unsigned(blocks), g.x, g.y, c.call.args.data(), c.call.args.size());
      ASSERT_NE(r, -2) << "source " << i << " has no kernel " << g.symbol;
      ASSERT_EQ(r, -1) << g.symbol << ": the host passes " << c.call.args.size()
                       << " argument words, the kernel's KilnArgs holds " << r;
    }
  }

 private:
  // Builds the unit (or finds it built: the file is keyed by its text,
  // emulated.h's and the flags) and loads it, for good: the emulator's
  // threads live in it (emulated.h's Team).
  void load(const std::string& unit) {
    const std::string emulator = read_text(fs::path(KILN_SOURCE_DIR) / "tests/backend/cuda/emulated.h");
    const std::string flags = cat("-std=c++20 -O1 -fPIC -shared -pthread -w -ffp-contract=off -fno-math-errno",
                                  " -I", KILN_SOURCE_DIR, " -I", KILN_CUDA_INCLUDE_DIR);
    const fs::path dir = fs::path(KILN_BINARY_DIR) / "test-cache" / "emulated_codegen";
    fs::create_directories(dir);
    const std::string key = cat(std::hash<std::string>{}(unit + emulator + flags));
    const fs::path so = dir / (key + ".so");
    if (!fs::exists(so)) {
      const fs::path cc = dir / (key + ".cc"), log = dir / (key + ".log"), tmp = dir / (key + ".so.tmp");
      std::ofstream(cc, std::ios::binary) << unit;
      const std::string cmd = cat(KILN_CXX_COMPILER, " ", flags, " -o ", tmp, " ", cc, " > ", log, " 2>&1");
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_text(log);
      fs::rename(tmp, so);
    }
    handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    entry_ = reinterpret_cast<Entry>(dlsym(handle_, "kiln_emulated"));
    ASSERT_NE(entry_, nullptr) << dlerror();
  }

  using Entry = int (*)(int, const char*, unsigned, int, int, const uint64_t*, size_t);
  void* handle_ = nullptr;
  Entry entry_ = nullptr;
};

TensorRef host_ref(std::vector<uint8_t>& bytes, const Tensor& t, const Strides& strides) {
  return TensorRef{bytes.data(), t.dtype(), t.shape(), strides};
}

// An input as the kernel reads it: the buffer of `storage`'s elements
// (in their contiguous order), read as `view` through `strides`.
struct Input {
  Tensor view, storage;
  Strides strides;
};

// Prepares a call of `body`'s kernels (variant `natural` in the natural
// layout) over `in`; `expected` gives the outputs' types.
std::unique_ptr<PendingCall> pending(const std::string& body, const std::string& kind,
                                     const std::vector<Input>& in, const std::vector<Tensor>& expected,
                                     Variant natural) {
  auto c = std::make_unique<PendingCall>();
  c->plan = codegen::make_plan(body, kind);
  c->buffers.reserve(in.size() + expected.size());  // the refs point into them
  std::vector<TensorRef> in_refs, out_refs;
  for (const Input& i : in) {
    c->buffers.push_back(element_bytes(i.storage));
    in_refs.push_back(host_ref(c->buffers.back(), i.view, i.strides));
  }
  for (const Tensor& e : expected) {
    c->buffers.emplace_back(size_t(e.shape().numel()) * itemsize(e.dtype()), kUnwritten);
    out_refs.push_back(host_ref(c->buffers.back(), e, contiguous_strides(e.shape())));
  }
  const codegen::Binding b = codegen::bind(c->plan, in_refs, out_refs);
  c->call = make_call(c->plan, launch_of(c->plan), b, codegen::full_constants(c->plan), natural);
  if (c->call.partial_bytes > 0) {
    c->partials.assign(c->call.partial_bytes, kUnwritten);
    c->call.args[c->call.partials_word] = reinterpret_cast<uint64_t>(c->partials.data());
  }
  c->source = generate_source(c->plan, b.space, c->call.variant);
  return c;
}

// The outputs of a call that has run, as CPU tensors.
std::vector<Tensor> outputs_of(const PendingCall& c, const std::vector<Tensor>& expected) {
  std::vector<Tensor> out;
  for (size_t j = 0; j < expected.size(); ++j) {
    const std::vector<uint8_t>& bytes = c.buffers[c.buffers.size() - expected.size() + j];
    out.push_back(from_host(bytes.data(), expected[j].dtype(), expected[j].shape()));
  }
  return out;
}

// Tolerance of a sum's float results (see the top of the file).
double tolerance(DType t) {
  switch (t) {
    case DType::f32: return 1e-6;
    case DType::f64: return 1e-15;
    case DType::bf16: return 1.0 / 128;  // one bf16 ulp
    case DType::f16: return 1.0 / 1024;  // one f16 ulp
    default: return 0;                   // exact
  }
}

void expect_close(const Tensor& got, const Tensor& cpu, const std::vector<double>& scale, const std::string& what) {
  ASSERT_EQ(got.shape(), cpu.shape()) << what;
  if (scale.empty() || !is_floating(cpu.dtype())) {
    EXPECT_EQ(element_bytes(got), element_bytes(cpu)) << what << ": not the CPU's bits";
    return;
  }
  const std::vector<double> a = got.to_vector<double>(), b = cpu.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    const double bound = tolerance(cpu.dtype()) * (std::abs(b[i]) + scale[i]);
    if (!(std::abs(a[i] - b[i]) <= bound) && reported++ < 5)
      ADD_FAILURE() << what << " element " << i << ": emulated " << a[i] << ", cpu " << b[i] << " (bound " << bound
                    << ")";
  }
}

// A body run both ways, with what it must match.
struct Case {
  std::string what, body, kind;
  std::vector<Input> in;
  std::vector<Tensor> cpu;    // the CPU's outputs
  std::vector<double> scale;  // sums: per result, sum of |x|; empty: exact
};

// Runs every case's specialised and shape-generic kernels (one host build
// for all) and compares them with the CPU and with each other.
void check(const std::vector<Case>& cases) {
  std::vector<std::unique_ptr<PendingCall>> calls;
  std::vector<const PendingCall*> sources;
  for (const Case& c : cases)
    for (Variant v : {Variant::specialised, Variant::shape_generic}) {
      calls.push_back(pending(c.body, c.kind, c.in, c.cpu, v));
      sources.push_back(calls.back().get());
    }
  HostBuild build(sources);
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<Tensor> got[2];
    for (int v = 0; v < 2; ++v) {
      PendingCall& call = *calls[2 * i + size_t(v)];
      build.run(int(2 * i) + v, call);
      if (::testing::Test::HasFatalFailure()) return;
      got[v] = outputs_of(call, c.cpu);
    }
    for (size_t j = 0; j < c.cpu.size(); ++j) {
      const std::string what = cat(c.what, ", output ", j);
      expect_close(got[0][j], c.cpu[j], c.scale, what);
      EXPECT_EQ(element_bytes(got[0][j]), element_bytes(got[1][j])) << what << ": the variants differ";
    }
  }
}

const ir::OpDef& op(const char* name) { return ir::get_op(name); }

// The body of one `name` node over `in`'s types.
std::string one_node(const char* name, const std::vector<Tensor>& in, const ir::Attrs& attrs) {
  ir::Graph g;
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : in) ids.push_back(g.add_input(t.type()));
  g.set_outputs(g.add_node(op(name), ids, attrs).outputs);
  return ir::to_text(g);
}

std::vector<Input> contiguous(const std::vector<Tensor>& in) {
  std::vector<Input> s;
  for (const Tensor& t : in) s.push_back({t, t, contiguous_strides(t.shape())});
  return s;
}

// Op `name` over contiguous `in` as a case, or nothing if the CPU refuses
// the inputs (a dtype the op does not take).
void add_op_case(std::vector<Case>& cases, const char* name, const std::vector<Tensor>& in, const ir::Attrs& attrs,
                 const std::string& kind, const std::string& what) {
  std::vector<Tensor> cpu;
  try {
    cpu = apply(op(name), in, attrs, kCPU);
  } catch (const Error&) {
    return;
  }
  cases.push_back({what, one_node(name, in, attrs), kind, contiguous(in), cpu, {}});
}

TEST(EmulatedCodegen, ElementwiseOpsInEveryDtype) {
  std::vector<Case> cases;
  for (DType t : kAllDTypes) {
    // More positions than 3 blocks' threads (the grid-stride loop); y broadcasts.
    const Tensor x = spread_tensor(t, {5, 333}, 1), y = spread_tensor(t, {333}, 2);
    for (const char* name : {"add", "mul", "div", "maximum", "lt", "neg", "exp", "tanh", "silu", "logical_not"})
      add_op_case(cases, name, ir::get_op(name).num_inputs == 2 ? std::vector<Tensor>{x, y} : std::vector<Tensor>{x},
                  {}, "elementwise", cat(name, " ", dtype_name(t)));
    add_op_case(cases, "where", {spread_tensor(DType::b8, {5, 333}, 3), x, y}, {}, "elementwise",
                cat("where ", dtype_name(t)));
    for (DType to : kAllDTypes)
      add_op_case(cases, "cast", {x}, {{"dtype", to}}, "elementwise",
                  cat("cast ", dtype_name(t), " to ", dtype_name(to)));
    add_op_case(cases, "full", {}, {{"shape", ir::IntList{4, 300}}, {"value", 2.75}, {"dtype", t}}, "elementwise",
                cat("full ", dtype_name(t)));
    if (t != DType::b8)
      add_op_case(cases, "arange", {}, {{"start", -3.0}, {"stop", 597.0}, {"step", 0.5}, {"dtype", t}},
                  "elementwise", cat("arange ", dtype_name(t)));
  }
  ASSERT_GT(cases.size(), 100u);
  check(cases);
}

TEST(EmulatedCodegen, StridedInputsAreReadThroughTheirStrides) {
  // x's buffer holds a [48, 64] tensor read as its transpose [64, 48]; y broadcasts.
  const Tensor x = spread_tensor(DType::f32, {48, 64}, 4), y = spread_tensor(DType::f32, {48}, 5);
  const Tensor xt = x.permute({1, 0});
  const Input transposed{xt, x, Strides{1, 64}}, row{y, y, Strides{1}};
  std::vector<Case> cases;
  cases.push_back({"add of a transpose", one_node("add", {xt, y}, {}), "elementwise", {transposed, row},
                   {apply1(op("add"), {xt, y})}, {}});
  const ir::Attrs rows{{"axes", ir::IntList{1}}, {"keepdim", false}};
  cases.push_back({"sum of a transpose's rows", one_node("sum", {xt}, rows), "reduction", {transposed},
                   {apply1(op("sum"), {xt}, rows)},
                   apply1(op("sum"), {apply1(op("abs"), {xt})}, rows).to_vector<double>()});
  check(cases);
}

TEST(EmulatedCodegen, ReductionsOverEveryWalk) {
  std::vector<Case> cases;
  for (const char* name : {"sum", "mean", "max", "min"})
    for (DType t : kAllDTypes)
      for (const test::Walk& w : test::reduction_walks()) {
        const Tensor x = spread_tensor(t, w.shape, 6);
        const ir::Attrs attrs{{"axes", w.axes}, {"keepdim", w.keepdim}};
        const size_t before = cases.size();
        add_op_case(cases, name, {x}, attrs, "reduction", cat(name, " ", dtype_name(t), " ", w.name));
        const std::string n(name);
        if (cases.size() == before || !is_floating(t) || (n != "sum" && n != "mean")) continue;
        std::vector<double> scale =
            apply1(op("sum"), {apply1(op("abs"), {x.to(DType::f64)})}, attrs).to_vector<double>();
        if (n == "mean")
          for (double& s : scale) s /= double(x.shape().numel()) / double(cases.back().cpu[0].shape().numel());
        cases.back().scale = scale;
      }
  ASSERT_GT(cases.size(), 100u);
  check(cases);
}

TEST(EmulatedCodegen, FusedNodesOfRandomGraphs) {
  std::vector<Case> cases;
  test::for_each_random_fused_node(30, [&](uint32_t seed, const ir::Node& n, const std::vector<Tensor>& in) {
    const std::string kind = n.attrs.has("kind") ? n.attrs.s("kind") : "elementwise";
    std::vector<Tensor> cpu = apply(*n.op, in, n.attrs, kCPU);
    // Sums fold in another order; what they sum is the body's: bounded per
    // result by the CPU's |result| and 1, as fused_cuda_test does.
    std::vector<double> scale;
    if (kind == "reduction")
      for (const Tensor& o : cpu) scale.resize(std::max<size_t>(scale.size(), size_t(o.shape().numel())), 1.0);
    cases.push_back({cat("seed ", seed, ": ", n.attrs.s("body")), n.attrs.s("body"), kind, contiguous(in), cpu, scale});
  });
  ASSERT_GT(cases.size(), 30u);
  check(cases);
}

// The fused nodes of the debug models' graph-trainer steps (f32 and bf16
// compute), each distinct body once, over spread inputs of its types: the
// bodies a training run on the GPU compiles.
TEST(EmulatedCodegen, FusedNodesOfTheDebugModelsTrainingSteps) {
  std::vector<Case> cases;
  std::set<std::string> seen;
  for (const char* name : {"llama3_debug", "qwen3_moe_debug"})
    for (DType compute : {DType::f32, DType::bf16}) {
      ModelConfig mc = model_config(name);
      mc.seq_len = 16;
      std::unique_ptr<CausalLM> model = build_model(mc, compute, 0);
      const optim::MixedPrecisionPolicy policy{compute, DType::f32};
      std::vector<std::string> names;
      std::vector<Tensor> params;
      for (auto& [n, p] : model->named_parameters()) names.push_back(n), params.push_back(*p);
      const std::vector<Tensor> masters = policy.master_params(params);
      optim::AdamW adamw({}, optim::default_param_groups(names, masters, 0.1));
      const optim::AdamWState state = adamw.init(masters);
      const Tensor ids = arange(0, 2 * 16, 1, DType::i64).reshape({2, 16});
      train::StepOptions o;
      o.rung = train::Rung::graph_trainer;
      train::TrainStep step(*model, policy, adamw, o);
      const ir::Graph g = compiler::optimize(step.graph(masters, state, {data::Batch{ids, ids, {}, {}}}), {});
      int fused = 0;
      for (const ir::Node& n : g.nodes()) {
        if (n.op->name != "fused" || !seen.insert(n.attrs.s("body")).second) continue;
        std::vector<Tensor> in;
        for (size_t i = 0; i < n.inputs.size(); ++i)
          in.push_back(spread_tensor(g.type(n.inputs[i]).dtype, g.type(n.inputs[i]).shape, uint32_t(fused + i)));
        const std::string kind = n.attrs.has("kind") ? n.attrs.s("kind") : "elementwise";
        std::vector<Tensor> cpu = apply(*n.op, in, n.attrs, kCPU);
        std::vector<double> scale;  // sums: as FusedNodesOfRandomGraphs
        if (kind == "reduction")
          for (const Tensor& out : cpu) scale.resize(std::max<size_t>(scale.size(), size_t(out.shape().numel())), 1.0);
        cases.push_back({cat(name, " ", dtype_name(compute), " node ", fused++, ": ", n.attrs.s("body")),
                         n.attrs.s("body"), kind, contiguous(in), cpu, scale});
      }
    }
  ASSERT_GT(cases.size(), 20u);
  check(cases);
}

}  // namespace
}  // namespace kiln::cuda::fused
