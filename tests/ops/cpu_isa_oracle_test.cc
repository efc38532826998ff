// The CPU kernels' copies (kiln/backend/cpu/isa.h) give the same bits: every
// op case of the oracle suite runs in strict mode (eager kernels, with
// gradients) in this process, on the best copy the CPU runs, and in a child
// process held to the x86-64-v3 baseline (KILN_CPU_ISA); every output and
// gradient must be the same bytes. And kernels come from the copy the
// CPU's best instruction set calls for.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kiln/backend/cpu/isa.h"
#include "tests/support/op_cases.h"
#include "tests/support/spread_values.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4");
}

bool held_to_baseline() {
  const char* e = std::getenv("KILN_CPU_ISA");
  return e && std::string(e) == "x86-64-v3";
}

// The library a registered CPU kernel's code lives in.
std::string library_of(const char* op) {
  const Kernel* k = find_kernel(DeviceKind::cpu, op);
  Dl_info info;
  if (!k || !dladdr(reinterpret_cast<void*>(k->fn), &info) || !info.dli_fname) return "?";
  return info.dli_fname;
}

TEST(CpuIsa, KernelsComeFromTheCopyForTheBestInstructionSet) {
  const bool v4 = cpu_has_avx512() && !held_to_baseline();
  EXPECT_EQ(cpu::kernel_isa().rfind(v4 ? "x86-64-v4" : "x86-64-v3", 0), 0u) << cpu::kernel_isa();
  for (const char* op : {"exp", "sum", "softmax", "rms_norm", "cast", "flash_attention"})
    EXPECT_EQ(library_of(op).find("x86_64_v4") != std::string::npos, v4)
        << op << " runs from " << library_of(op);
  // Kernels that do not loop over elements come only from the baseline.
  EXPECT_EQ(library_of("topk").find("x86_64_v4"), std::string::npos);
}

// Every case's strict outputs and gradients, each as a named record.
std::string strict_bytes_of_every_case() {
  std::ostringstream s;
  for (int i = 0; i < test::op_case_count(); ++i) {
    const test::OpCase c = test::load_op_case(i);
    test::ModeRun r = test::run_op_case("strict", c);
    int k = 0;
    for (const auto* list : {&r.outs, &r.grads})
      for (const Tensor& t : *list) {
        std::vector<uint8_t> b = t.defined() ? test::element_bytes(t) : std::vector<uint8_t>();
        s << c.name << " #" << k++ << " " << b.size() << "\n";
        s.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
      }
  }
  return s.str();
}

// Record name -> bytes.
std::map<std::string, std::string> records(const std::string& all) {
  std::map<std::string, std::string> m;
  std::istringstream in(all);
  std::string head;
  while (std::getline(in, head)) {
    size_t space = head.rfind(' ');
    size_t n = std::stoul(head.substr(space + 1));
    std::string bytes(n, '\0');
    in.read(bytes.data(), std::streamsize(n));
    m[head.substr(0, space)] = bytes;
  }
  return m;
}

TEST(CpuIsa, EveryOpCaseGivesTheSameBitsOnEitherCopy) {
  ASSERT_TRUE(test::op_cases().error.empty()) << test::op_cases().error;
  if (const char* dump = std::getenv("KILN_CPU_ISA_TEST_DUMP")) {  // the child
    std::ofstream(dump, std::ios::binary) << strict_bytes_of_every_case();
    return;
  }
  if (!cpu_has_avx512() || held_to_baseline())
    GTEST_SKIP() << "one kernel copy runs here: " << cpu::kernel_isa();
  test::TempDir dir;
  const std::string dump = dir / "baseline.bin", log = dir / "child.log";
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(len, 0);
  self[len] = '\0';
  std::string cmd = std::string("KILN_CPU_ISA=x86-64-v3 KILN_CPU_ISA_TEST_DUMP='") + dump + "' '" +
                    self + "' --gtest_filter=CpuIsa.EveryOpCaseGivesTheSameBitsOnEitherCopy > '" +
                    log + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << std::ifstream(log).rdbuf();
  std::ifstream in(dump, std::ios::binary);
  std::string baseline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto want = records(baseline), got = records(strict_bytes_of_every_case());
  ASSERT_GT(want.size(), 100u);
  ASSERT_EQ(got.size(), want.size());
  int differing = 0;
  for (const auto& [name, bytes] : want)
    if (got[name] != bytes && ++differing <= 20) ADD_FAILURE() << name << " differs between the copies";
  EXPECT_EQ(differing, 0);
}

}  // namespace
}  // namespace kiln
