// Runs the kiln command line as a user would and checks what it prints and
// its exit status.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

namespace {

struct CliRun {
  int status;
  std::string output;  // stdout and stderr together
};

CliRun kiln(const std::string& args, const std::string& env = "") {
  const char* cli = std::getenv("KILN_CLI");
  EXPECT_NE(cli, nullptr) << "KILN_CLI is set by ctest";
  std::string cmd = env + " " + std::string(cli ? cli : "kiln") + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string last_line(const std::string& s) {
  size_t end = s.find_last_not_of('\n');
  size_t start = s.rfind('\n', end);
  return s.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

TEST(Cli, InfoPrintsVersionDevicesFeaturesAndOneDnn) {
  CliRun r = kiln("info");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("kiln 0."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  cuda"), std::string::npos) << r.output;  // its GPUs, or why there are none
  EXPECT_NE(r.output.find("avx512f="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("amx_bf16="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("oneDNN "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\ncollectives on cpu: Open MPI v"), std::string::npos) << r.output;
  // A CUDA build names the NCCL it loads for collectives on GPUs, or why none loads.
  if (r.output.find("built without the CUDA backend") == std::string::npos) {
    EXPECT_NE(r.output.find("\ncollectives on cuda: NCCL 2."), std::string::npos) << r.output;
    CliRun none = kiln("info", "KILN_NCCL_LIBRARY=/nonexistent/libnccl.so.2");
    EXPECT_EQ(none.status, 0) << none.output;
    EXPECT_NE(none.output.find("\ncollectives on cuda: none: NCCL is needed for collectives on "
                               "GPUs and /nonexistent/libnccl.so.2 could not be loaded"),
              std::string::npos)
        << none.output;
  }
}

// ONEDNN_MAX_CPU_ISA=AVX2 makes oneDNN dispatch as on a CPU without bf16 dot products.
TEST(Cli, InfoSaysWhichKernelCopyRunsAndRefusesABadChoice) {
  CliRun info = kiln("info");
  EXPECT_EQ(info.status, 0) << info.output;
  EXPECT_NE(info.output.find(" kernel threads, kernels for "), std::string::npos) << info.output;
  CliRun bad = kiln("info", "KILN_CPU_ISA=avx9");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("KILN_CPU_ISA=avx9: "), std::string::npos) << bad.output;
}

TEST(Cli, InfoSaysWhichPathBf16MatmulsTake) {
  CliRun avx2 = kiln("info", "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(avx2.status, 0) << avx2.output;
  EXPECT_NE(avx2.output.find("bf16 matmuls: widened to f32 for oneDNN's f32 matmul (oneDNN isa avx2 "
                             "has no bf16 dot products)"),
            std::string::npos)
      << avx2.output;
  CliRun widened = kiln("info", "KILN_CPU_BF16_MATMUL=f32");
  EXPECT_NE(widened.output.find("bf16 matmuls: widened to f32 for oneDNN's f32 matmul "
                                "(KILN_CPU_BF16_MATMUL=f32)"),
            std::string::npos)
      << widened.output;
  // Asked for, but impossible: an error, not a silent fallback.
  CliRun native = kiln("info", "ONEDNN_MAX_CPU_ISA=AVX2 KILN_CPU_BF16_MATMUL=native");
  EXPECT_NE(native.status, 0);
  EXPECT_NE(native.output.find("oneDNN has no bf16 matmul on this CPU (isa avx2)"), std::string::npos)
      << native.output;
  CliRun bad = kiln("info", "KILN_CPU_BF16_MATMUL=fast");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("KILN_CPU_BF16_MATMUL is 'fast'; expected auto, native"), std::string::npos)
      << bad.output;
}

TEST(Cli, BenchGemmEndsWithGflops) {
  for (const char* args : {"--m 96 --n 80 --k 64 --dtype f32", "--m 64 --n 64 --k 64 --dtype bf16 --tb",
                           "--m 64 --n 32 --k 48 --dtype f32 --ta --threads 1"}) {
    CliRun r = kiln(std::string("bench gemm ") + args);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(std::regex_match(last_line(r.output), std::regex(R"(GFLOP/s: [0-9]+(\.[0-9]+)?)")))
        << "last line: '" << last_line(r.output) << "'";
  }
}

TEST(Cli, BadInputIsAClearErrorAndNonZeroExit) {
  CliRun r = kiln("bench gemm --m 64 --n 64 --k 64 --dtype f8");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("f8"), std::string::npos) << r.output;
  r = kiln("frobnicate");
  EXPECT_NE(r.status, 0);
  r = kiln("bench gemm --m -3 --n 64 --k 64");
  EXPECT_NE(r.status, 0);
  r = kiln("demo --steps 2", "KILN_EAGER_MODE=turbo");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("unknown eager mode 'turbo'"), std::string::npos) << r.output;
}

TEST(Cli, DemoTrainsAndTheLossFalls) {
  for (const char* mode : {"strict", "debug"}) {
    CliRun r = kiln("demo --steps 40", std::string("KILN_EAGER_MODE=") + mode);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("loss fell from"), std::string::npos) << r.output;
  }
}

}  // namespace
