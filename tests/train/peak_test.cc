// The peak cache MFU divides by (kiln/train/peak.h): a measurement is used
// only for the CPU model, ISA, thread count and build it was taken with; anything
// else, or a file that cannot be read, means measuring again, never a crash.
// The measurement itself is a stub here: nothing depends on timing.
#include "kiln/train/peak.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/build_id.h"
#include "kiln/train/peak_measure.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class PeakCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_peak_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    path_ = dir_ / "peak.json";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Peak key(const std::string& cpu, int threads) {
    Peak p;
    p.cpu = cpu;
    p.onednn_isa = "avx512_core_bf16";
    p.threads = threads;
    p.build = "build 1";
    return p;
  }

  // What the stub measurement returns: `key` with both dtypes measured.
  PeakLookup lookup(const Peak& k, DType compute = DType::f32, double gflops = 100) {
    return cached_or_measured_peak(path_, k, compute, [&] {
      ++measured_;
      Peak p = k;
      p.f32_gflops = gflops;
      p.bf16_gflops = 2 * gflops;
      p.method = "quick";
      return p;
    });
  }

  void write(const std::string& text) {
    fs::create_directories(dir_);
    std::ofstream(path_) << text;
  }

  fs::path dir_, path_;
  int measured_ = 0;
};

TEST_F(PeakCache, MeasuresOnceThenReadsTheCache) {
  PeakLookup first = lookup(key("cpu A", 2));
  EXPECT_TRUE(first.measured_now);
  EXPECT_TRUE(first.cache_error.empty()) << first.cache_error;
  ASSERT_TRUE(fs::exists(path_));
  PeakLookup again = lookup(key("cpu A", 2), DType::f32, 999);
  EXPECT_FALSE(again.measured_now);
  EXPECT_EQ(measured_, 1);
  EXPECT_EQ(again.peak.f32_gflops, 100);
  EXPECT_EQ(again.peak.bf16_gflops, 200);
  EXPECT_EQ(again.peak.method, "quick");
}

TEST_F(PeakCache, AnotherCpuOrThreadCountIsMeasuredAndKeptBeside) {
  lookup(key("cpu A", 2));
  EXPECT_TRUE(lookup(key("cpu B", 2), DType::f32, 50).measured_now);  // another CPU model
  EXPECT_TRUE(lookup(key("cpu A", 8), DType::f32, 400).measured_now);  // another thread count
  Peak other_isa = key("cpu A", 2);
  other_isa.onednn_isa = "avx2";
  EXPECT_TRUE(lookup(other_isa, DType::f32, 30).measured_now);
  EXPECT_EQ(measured_, 4);
  EXPECT_EQ(load_peaks(path_).size(), 4u);
  // Each is found again as it was measured.
  EXPECT_EQ(lookup(key("cpu A", 2)).peak.f32_gflops, 100);
  EXPECT_EQ(lookup(key("cpu B", 2)).peak.f32_gflops, 50);
  EXPECT_EQ(lookup(key("cpu A", 8)).peak.f32_gflops, 400);
  EXPECT_EQ(measured_, 4);
}

// Another build's GEMMs may be faster or slower: its measurement is taken
// again, and replaces the old one.
TEST_F(PeakCache, AnotherBuildsMeasurementIsMeasuredOver) {
  lookup(key("cpu A", 2), DType::f32, 100);
  Peak rebuilt = key("cpu A", 2);
  rebuilt.build = "build 2";
  PeakLookup r = lookup(rebuilt, DType::f32, 120);
  EXPECT_TRUE(r.measured_now);
  EXPECT_EQ(r.peak.f32_gflops, 120);
  ASSERT_EQ(load_peaks(path_).size(), 1u);
  EXPECT_EQ(load_peaks(path_)[0].build, "build 2");
  EXPECT_FALSE(lookup(rebuilt, DType::f32, 999).measured_now);
  EXPECT_EQ(measured_, 2);
}

TEST_F(PeakCache, ADtypeNotMeasuredIsMeasured) {
  Peak f32_only = key("cpu A", 2);
  f32_only.f32_gflops = 100;
  save_peak(f32_only, path_);
  EXPECT_FALSE(lookup(key("cpu A", 2), DType::f32).measured_now);
  PeakLookup bf16 = lookup(key("cpu A", 2), DType::bf16, 70);
  EXPECT_TRUE(bf16.measured_now);
  EXPECT_EQ(bf16.peak.bf16_gflops, 140);
  ASSERT_EQ(load_peaks(path_).size(), 1u);  // replaced, not added
  EXPECT_EQ(load_peaks(path_)[0].bf16_gflops, 140);
}

TEST_F(PeakCache, ACorruptFileIsMeasuredOver) {
  for (const std::string& text :
       {std::string("not json {"), std::string("[1, 2]"), std::string("{\"cpu\": \"cpu A\"}"),
        std::string("{\"measurements\": 3}"),
        std::string("{\"measurements\": [7, {\"cpu\": 1, \"threads\": \"two\"}, {\"cpu\": \"cpu "
                    "A\", \"onednn_isa\": \"avx512_core_bf16\", \"threads\": 2, \"f32_gflops\": "
                    "\"fast\"}]}"),
        std::string("\0\0\0", 3)}) {
    write(text);
    measured_ = 0;
    PeakLookup r = lookup(key("cpu A", 2));
    EXPECT_TRUE(r.measured_now) << text;
    EXPECT_EQ(measured_, 1) << text;
    ASSERT_EQ(load_peaks(path_).size(), 1u) << text;  // rewritten whole
    EXPECT_EQ(load_peaks(path_)[0].f32_gflops, 100) << text;
  }
}

TEST_F(PeakCache, AnUnwritableCacheStillGivesThePeak) {
  write("");
  fs::path blocked = path_ / "peak.json";  // under a regular file: no directory can be made
  PeakLookup r = cached_or_measured_peak(blocked, key("cpu A", 2), DType::f32, [&] {
    Peak p = key("cpu A", 2);
    p.f32_gflops = 100;
    return p;
  });
  EXPECT_TRUE(r.measured_now);
  EXPECT_EQ(r.peak.f32_gflops, 100);
  EXPECT_NE(r.cache_error.find("peak.json"), std::string::npos) << r.cache_error;
}

// The trainer's entry point finds this CPU's and this build's cached entry
// without measuring (the cached figure is one no measurement here would give).
TEST_F(PeakCache, RunPeakUsesThisCpusCachedEntry) {
  const char* old = std::getenv("KILN_CACHE_DIR");
  std::string saved = old ? old : "";
  ::setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
  Peak p = key(backend(kCPU).model(0), 3);
  p.onednn_isa = backend(kCPU).gemm_isa(0);
  p.build = kiln_build_id();
  p.f32_gflops = 123456;
  p.bf16_gflops = 234567;
  p.method = "thorough";
  save_peak(p, path_);
  std::optional<DevicePeak> f32 = train::run_peak(kCPU, DType::f32, 3),
                            bf16 = train::run_peak(kCPU, DType::bf16, 3);
  ASSERT_TRUE(f32 && bf16);
  EXPECT_EQ(f32->flops, 123456e9);
  EXPECT_EQ(bf16->flops, 234567e9);
  EXPECT_NE(f32->source.find("123456.0 GFLOP/s f32 GEMM peak on 3 threads"), std::string::npos)
      << f32->source;
  EXPECT_NE(f32->source.find("`kiln bench peak`"), std::string::npos) << f32->source;
  EXPECT_NE(f32->source.find(path_.string()), std::string::npos) << f32->source;
  EXPECT_FALSE(train::run_peak(kCPU, DType::f16, 3).has_value());  // no GEMM peak for it
  if (old)
    ::setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  else
    ::unsetenv("KILN_CACHE_DIR");
}

TEST(TablePeak, NoneForACpu) { EXPECT_FALSE(table_peak(kCPU, DType::bf16).has_value()); }

// The names the driver gives (cudaDeviceProp::name), against the data sheets.
TEST(TablePeak, DataSheetPeaksMatchTheWholePartName) {
  struct Case {
    const char* name;
    double bf16, f32;  // TFLOP/s; 0: none
  };
  for (const Case& c : std::vector<Case>{{"NVIDIA H100 80GB HBM3", 989, 67},
                                         {"NVIDIA H200", 989, 67},
                                         {"NVIDIA H100 PCIe", 756, 51},
                                         {"NVIDIA H100 NVL", 835, 60},
                                         {"NVIDIA A100-SXM4-80GB", 312, 19.5},
                                         {"NVIDIA A10", 125, 31.2},  // not the A100's
                                         {"NVIDIA L40", 181, 90.5},  // not the L4's
                                         {"NVIDIA L4", 121, 30.3},
                                         {"NVIDIA B200", 2250, 0},
                                         {"NVIDIA GeForce RTX 4090", 0, 0}}) {
    for (auto [dtype, tflops] : {std::pair{DType::bf16, c.bf16}, {DType::f32, c.f32}}) {
      std::optional<DevicePeak> p = data_sheet_peak(c.name, dtype);
      if (tflops == 0) {
        EXPECT_FALSE(p.has_value()) << c.name << " " << dtype_name(dtype) << ": " << p->source;
        continue;
      }
      ASSERT_TRUE(p.has_value()) << c.name << " " << dtype_name(dtype);
      EXPECT_DOUBLE_EQ(p->flops, tflops * 1e12) << c.name << " " << dtype_name(dtype);
      EXPECT_NE(p->source.find("(data sheet)"), std::string::npos) << p->source;
    }
  }
  EXPECT_FALSE(data_sheet_peak("NVIDIA H100 80GB HBM3", DType::f16).has_value());
  EXPECT_EQ(data_sheet_peak("NVIDIA H100 PCIe", DType::bf16)->source,
            "756 TFLOP/s H100 PCIe dense bf16 peak (data sheet)");
}

}  // namespace
}  // namespace kiln
