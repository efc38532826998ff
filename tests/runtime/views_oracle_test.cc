// Views and in-place writes through views against PyTorch: each scenario of
// tests/oracle/gen_functions.py is replayed step by step.
#include <gtest/gtest.h>

#include "kiln/ops/elementwise.h"
#include "tests/support/oracle.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

const test::SafeTensors& ref() { return test::oracle_file("functions"); }

Tensor base() { return arange(0, 24, 1, DType::f32).reshape({2, 3, 4}); }

void expect_equal(const Tensor& kiln, const std::string& name) {
  Tensor torch = ref().get(name);
  EXPECT_EQ(kiln.shape(), torch.shape()) << name;
  EXPECT_EQ(kiln.to_vector<double>(), torch.to_vector<double>()) << name;
}

TEST(ViewsVsTorch, WriteThroughPermutedSlice) {
  Tensor b = base();
  Tensor v = b.permute({2, 0, 1}).slice(0, 1, 3);
  v.mul_(scalar(2));
  expect_equal(b, "permute_slice_mul.base");
  expect_equal(v, "permute_slice_mul.view");
}

TEST(ViewsVsTorch, CopyBroadcastsIntoSelect) {
  Tensor b = base();
  b.select(1, 2).copy_(from_vector<float>({10, 20, 30, 40}, {4}));
  expect_equal(b, "select_copy.base");
}

TEST(ViewsVsTorch, AddThroughSteppedSlice) {
  Tensor b = base();
  b.slice(2, 0, 4, 2).add_(full({2, 3, 2}, 100));
  expect_equal(b, "step_slice_add.base");
}

TEST(ViewsVsTorch, FillThroughTranspose) {
  Tensor b = base();
  b.transpose(0, 2).select(0, 0).fill_(-1);
  expect_equal(b, "transpose_fill.base");
}

TEST(ViewsVsTorch, ReshapeOfNonContiguousViewCopies) {
  Tensor b = base();
  Tensor r = b.transpose(1, 2).reshape({2, 12});
  r.fill_(0);
  expect_equal(b, "reshape_copy.base");
  expect_equal(r, "reshape_copy.reshaped");
}

TEST(ViewsVsTorch, ChainOfViews) {
  Tensor b = base();
  Tensor w = b.unsqueeze(0).squeeze(0).select(0, 1).t().select(0, 2);
  w.copy_(from_vector<float>({7, 8, 9}, {3}));
  expect_equal(b, "view_chain.base");
}

TEST(ViewsVsTorch, ExpandedReadIntoInPlaceWrite) {
  Tensor b = base();
  Tensor e = b.select(0, 0).slice(0, 0, 1).expand({3, 4});
  b.select(0, 1).add_(e);
  expect_equal(b, "expand_add.base");
}

TEST(ViewsVsTorch, CopyConvertsDtype) {
  Tensor h = zeros({3}, DType::bf16);
  h.copy_(from_vector<float>({1.00390625f, 2.0f, 3.0078125f}, {3}));
  expect_equal(h, "bf16_copy.dst");
}

}  // namespace
}  // namespace kiln
