// Views and in-place writes through views on CUDA against the CPU: the
// basic view behaviours of tests/runtime/views_test.cc with the tensors on
// cuda:0, and every pattern of the view-writes suite
// (tests/support/view_writes.h) in every mode, whose results and gradients
// must equal the CPU's bit for bit (f64 copies, adds and multiplies, which
// round the same on both devices). The oracle's view_writes data gives the
// inputs and cotangents.
#include <gtest/gtest.h>

#include "kiln/ops/elementwise.h"
#include "kiln/base/error.h"
#include "tests/support/oracle.h"
#include "tests/support/support.h"
#include "tests/support/view_writes.h"

namespace kiln {
namespace {

constexpr Device kGPU{DeviceKind::cuda, 0};

Tensor iota(const Shape& s, DType dtype = DType::f32) {
  return arange(0, double(s.numel()), 1, dtype).reshape(s).to(kGPU);
}

std::vector<float> on_host(const Tensor& t) {
  EXPECT_EQ(t.device(), kGPU);
  return t.to(kCPU).to_vector<float>();
}

TEST(ViewsCuda, TransposeSharesStorageAndReadsStrided) {
  Tensor a = iota({2, 3});
  Tensor t = a.t();
  EXPECT_EQ(t.impl().storage, a.impl().storage);
  EXPECT_EQ(on_host(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(on_host(t.contiguous()), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(ViewsCuda, SliceWithStepAndSelect) {
  Tensor a = iota({4, 5});
  EXPECT_EQ(on_host(a.slice(1, 0, 5, 2)),
            (std::vector<float>{0, 2, 4, 5, 7, 9, 10, 12, 14, 15, 17, 19}));
  EXPECT_EQ(on_host(a.select(0, -1)), (std::vector<float>{15, 16, 17, 18, 19}));
}

TEST(ViewsCuda, WriteThroughSliceIsVisibleInBase) {
  Tensor a = zeros({3, 4}).to(kGPU);
  a.slice(1, 1, 3).fill_(7);
  a.select(0, 2).copy_(iota({4}));
  EXPECT_EQ(on_host(a), (std::vector<float>{0, 7, 7, 0, 0, 7, 7, 0, 0, 1, 2, 3}));
}

TEST(ViewsCuda, ReshapeOfTransposeCopies) {
  Tensor a = iota({2, 3});
  Tensor r = a.t().reshape({6});
  EXPECT_NE(r.impl().storage, a.impl().storage);
  EXPECT_EQ(on_host(r), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(ViewsCuda, ExpandBroadcastsWithoutCopy) {
  Tensor a = iota({3, 1});
  Tensor e = a.expand({3, 2});
  EXPECT_EQ(e.impl().storage, a.impl().storage);
  EXPECT_EQ(on_host(e), (std::vector<float>{0, 0, 1, 1, 2, 2}));
}

struct Case {
  std::string pattern;
  test::WriteMode mode;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.pattern << " in " << test::mode_name(c.mode);
}

class ViewWritesCuda : public ::testing::TestWithParam<Case> {};

// The oracle's inputs and cotangents (tests/oracle/gen_view_writes.py).
const test::SafeTensors& ref() { return test::oracle_file("view_writes"); }

TEST_P(ViewWritesCuda, MatchCpu) {
  const auto& [pattern, mode] = GetParam();
  const test::ViewWriteBody& body = test::view_write_patterns().at(pattern);
  auto at = [&](const std::string& what) { return ref().get(pattern + "." + what); };
  std::vector<Tensor> args = {at("x"), at("s")}, cots;
  for (size_t i = 0; ref().has(cat(pattern, ".cot.", i)); ++i) cots.push_back(at(cat("cot.", i)));
  test::ViewWriteRun want = test::run_view_write(body, mode, args, cots);
  std::vector<Tensor> gargs, gcots;
  for (const Tensor& t : args) gargs.push_back(t.to(kGPU));
  for (const Tensor& t : cots) gcots.push_back(t.to(kGPU));
  test::ViewWriteRun got = test::run_view_write(body, mode, gargs, gcots);
  ASSERT_EQ(got.outs.size(), want.outs.size());
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.outs.size(); ++i) {
    EXPECT_EQ(got.outs[i].device(), kGPU) << "output " << i;
    EXPECT_EQ(got.outs[i].shape(), want.outs[i].shape()) << "output " << i;
    EXPECT_EQ(got.outs[i].to(kCPU).to_vector<double>(), want.outs[i].to_vector<double>())
        << "output " << i;
  }
  for (size_t i = 0; i < want.grads.size(); ++i)
    EXPECT_EQ(got.grads[i].to(kCPU).to_vector<double>(), want.grads[i].to_vector<double>())
        << "gradient " << i;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& [name, body] : test::view_write_patterns())
    for (test::WriteMode m : test::kAllWriteModes) cases.push_back({name, m});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllModes, ViewWritesCuda, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.pattern + "_" + test::mode_name(info.param.mode);
                         });

}  // namespace
}  // namespace kiln
