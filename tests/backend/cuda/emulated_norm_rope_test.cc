// CUDA's kernels of rms_norm, rope and silu_mul (forward and backward) run
// on the CPU (tests/backend/cuda/emulated.h) with the launches of their .cu
// files, against the CPU's kernels. Their headers say they compute the
// CPU's arithmetic in the CPU's order; on the host their math functions are
// the CPU's too, so every output must be the CPU's bits. Rows and tables
// are sized so that warps end part-way (rms_norm's tail past 16 lanes, a
// last block of fewer rows), the grid-stride loops go round more than once
// (two blocks), and the weight gradient has a partial chunk of rows.
#include "tests/backend/cuda/emulated.h"  // first: the kernels compile for the host

#include "kiln/backend/cuda/kernels/rms_norm.cuh"
#include "kiln/backend/cuda/kernels/rope.cuh"
#include "kiln/backend/cuda/kernels/silu_mul.cuh"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/tensor.h"
#include "tests/backend/cuda/emulated_checks.h"
#include "tests/support/spread_values.h"

namespace kiln {
namespace {

namespace emulated = cuda::emulated;
using test::element_bytes;
using test::expect_cpu_bits;
using test::host;
using test::launch_n;
using test::spread_tensor;

const ir::OpDef& op(const char* name) { return ir::get_op(name); }

constexpr DType kDtypes[] = {DType::f32, DType::bf16, DType::f16, DType::f64};

template <class T>
void check_rms_norm(DType dt) {
  using C = codegen::compute_t<T>;
  using namespace cuda::rms;
  const std::string name = dtype_name(dt);
  // 75 rows: a partial last block of warps and a partial last chunk of 32;
  // 53 columns: lanes past the 16 that fold, and a tail.
  const long long rows = 75, d = 53;
  const Tensor x = spread_tensor(dt, {3, 25, d}, 1), w = spread_tensor(dt, {d}, 2), g = spread_tensor(dt, {3, 25, d}, 3);
  const double eps = 1e-5;
  const std::vector<Tensor> fwd = apply(op("rms_norm"), std::vector<Tensor>{x, w}, {{"eps", eps}}, kCPU);
  const std::vector<Tensor> bwd = apply(op("rms_norm_backward"), std::vector<Tensor>{x, w, g}, {{"eps", eps}}, kCPU);
  const std::vector<T> hx = host<T>(x), hw = host<T>(w), hg = host<T>(g);

  std::vector<T> out(static_cast<size_t>(rows * d));
  emulated::launch(dim3(row_blocks(rows)), 32 * kRowsPerBlock, 0, rms_norm_k<T>, hx.data(), hw.data(), out.data(),
                   rows, d, C(eps));
  expect_cpu_bits(out, fwd[0], "rms_norm " + name);

  const long long chunks = (rows + kChunk - 1) / kChunk;
  std::vector<T> dx(static_cast<size_t>(rows * d)), dw(static_cast<size_t>(d));
  std::vector<C> inv(static_cast<size_t>(rows)), partial(static_cast<size_t>(chunks * d));
  emulated::launch(dim3(row_blocks(rows)), 32 * kRowsPerBlock, 0, rms_norm_dx_k<T>, hx.data(), hw.data(), hg.data(),
                   dx.data(), inv.data(), rows, d, C(eps));
  launch_n(rms_norm_dw_partial_k<T>, chunks * d, hx.data(), hg.data(), inv.data(), partial.data(), rows, d);
  launch_n(rms_norm_dw_k<T>, d, partial.data(), dw.data(), chunks);
  expect_cpu_bits(dx, bwd[0], "rms_norm dx " + name);
  expect_cpu_bits(dw, bwd[1], "rms_norm dw " + name);
}

TEST(EmulatedNormRope, RmsNormIsTheCpusBits) {
  check_rms_norm<float>(DType::f32);
  check_rms_norm<bf16>(DType::bf16);
  check_rms_norm<f16>(DType::f16);
  check_rms_norm<double>(DType::f64);
}

template <class T>
void check_rope(DType dt, bool per_batch) {
  using C = codegen::compute_t<T>;
  using namespace cuda::rope;
  const DType ct = std::is_same_v<C, double> ? DType::f64 : DType::f32;
  const std::string what = cat(dtype_name(dt), per_batch ? " per batch" : " per position");
  const long long B = 2, S = 7, H = 3, D = 10;
  const Tensor x = spread_tensor(dt, {B, S, H, D}, 4), g = spread_tensor(dt, {B, S, H, D}, 5);
  const Shape table = per_batch ? Shape{B, S, D} : Shape{S, D};
  const Tensor cos = spread_tensor(ct, table, 6), sin = spread_tensor(ct, table, 7);
  const std::vector<Tensor> fwd = apply(op("rope"), std::vector<Tensor>{x, cos, sin}, {}, kCPU);
  const std::vector<Tensor> bwd = apply(op("rope_backward"), std::vector<Tensor>{x, cos, sin, g}, {}, kCPU);
  const std::vector<T> hx = host<T>(x), hg = host<T>(g);
  const std::vector<C> hcos = host<C>(cos), hsin = host<C>(sin);
  const RopeDims r{B, S, H, D, D / 2, per_batch};
  const long long n = B * S * H * D;

  std::vector<T> out(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  launch_n(rope_k<T, C>, n, hx.data(), hcos.data(), hsin.data(), out.data(), r);
  expect_cpu_bits(out, fwd[0], "rope " + what);
  std::vector<C> dcos(hcos.size()), dsin(hsin.size());
  launch_n(rope_dx_k<T, C>, n, hg.data(), hcos.data(), hsin.data(), dx.data(), r);
  launch_n(rope_dtable_k<T, C>, r.table_rows() * r.dim, hx.data(), hg.data(), dcos.data(), dsin.data(), r);
  expect_cpu_bits(dx, bwd[0], "rope dx " + what);
  expect_cpu_bits(dcos, bwd[1], "rope dcos " + what);
  expect_cpu_bits(dsin, bwd[2], "rope dsin " + what);
}

TEST(EmulatedNormRope, RopeIsTheCpusBits) {
  for (bool per_batch : {false, true}) {
    check_rope<float>(DType::f32, per_batch);
    check_rope<bf16>(DType::bf16, per_batch);
    check_rope<f16>(DType::f16, per_batch);
    check_rope<double>(DType::f64, per_batch);
  }
}

template <class T>
void check_silu_mul(DType dt) {
  using namespace cuda::silu;
  const std::string name = dtype_name(dt);
  const long long n = 7 * 111;  // more than two blocks' threads
  const Tensor gate = spread_tensor(dt, {7, 111}, 8), up = spread_tensor(dt, {7, 111}, 9),
               dy = spread_tensor(dt, {7, 111}, 10);
  const std::vector<Tensor> fwd = apply(op("silu_mul"), std::vector<Tensor>{gate, up}, {}, kCPU);
  const std::vector<Tensor> bwd = apply(op("silu_mul_backward"), std::vector<Tensor>{gate, up, dy}, {}, kCPU);
  const std::vector<T> hgate = host<T>(gate), hup = host<T>(up), hdy = host<T>(dy);
  std::vector<T> out(static_cast<size_t>(n)), dgate(static_cast<size_t>(n)), dup(static_cast<size_t>(n));
  launch_n(silu_mul_k<T>, n, hgate.data(), hup.data(), out.data());
  launch_n(silu_mul_backward_k<T>, n, hgate.data(), hup.data(), hdy.data(), dgate.data(), dup.data());
  expect_cpu_bits(out, fwd[0], "silu_mul " + name);
  expect_cpu_bits(dgate, bwd[0], "silu_mul dgate " + name);
  expect_cpu_bits(dup, bwd[1], "silu_mul dup " + name);
}

TEST(EmulatedNormRope, SiluMulIsTheCpusBits) {
  check_silu_mul<float>(DType::f32);
  check_silu_mul<bf16>(DType::bf16);
  check_silu_mul<f16>(DType::f16);
  check_silu_mul<double>(DType::f64);
}

}  // namespace
}  // namespace kiln
