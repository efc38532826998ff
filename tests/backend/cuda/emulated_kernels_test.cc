// kiln's hand-written CUDA kernels run on the CPU (emulated.h: real
// threads and barriers per block) against the CPU kernels of the same ops,
// so their indexing, masking, tiling and synchronisation are checked where
// there is no GPU (the cuda-labelled tests check them on one): flash
// attention forward and backward for every query tile height, linear
// cross-entropy's row kernels (the tiles' logits from CPU products), and
// grouped matmul's planning, products (tensor-core fragments for bf16, scalar
// FMAs for f32/f64), padding and size checks.
#include "tests/backend/cuda/emulated.h"  // first: the kernels compile for the host

#include "kiln/backend/cuda/kernels/flash_attention.cuh"
#include "kiln/backend/cuda/kernels/flash_attention_tc.cuh"
#include "kiln/backend/cuda/kernels/grouped_matmul.cuh"
#include "kiln/backend/cuda/kernels/linear_cross_entropy.cuh"

#include <gtest/gtest.h>

#include <vector>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/shape.h"
#include "tests/support/fused_checks.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace test;
namespace emulated = cuda::emulated;

template <class C>
std::vector<C> values(const Tensor& t) {
  return t.to_vector<C>();
}

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  std::vector<double> out;
  for (const T& x : v) out.push_back(double(codegen::widen(x)));
  return out;
}

// ------------------------------------------------------------ attention

template <class T, class C = codegen::compute_t<T>>
struct AttentionRun {
  std::vector<T> q, k, v, dout;
  std::vector<C> lse, delta;
  std::vector<int64_t> doc;
  cuda::flash::Dims d;
  C scale;

  AttentionRun(const AttentionCase& c, const std::vector<Tensor>& bin)
      : q(values<T>(bin[0])), k(values<T>(bin[1])), v(values<T>(bin[2])),
        dout(values<T>(bin[3])), lse(values<C>(bin[4])), delta(values<C>(bin[5])),
        d{c.batch, c.q_heads, c.kv_heads, c.q_len, c.kv_len, c.head_dim, c.v_dim,
          c.kv_len - c.q_len, c.causal, c.window},
        scale(C(1.0 / std::sqrt(double(c.head_dim)))) {
    if (bin.size() == 7) doc = bin[6].to_vector<int64_t>();
  }
  cuda::flash::DocIds docs() const { return {doc.empty() ? nullptr : doc.data(), true}; }
};

template <class C, int Rows>
size_t tile_bytes(const cuda::flash::Dims& d, bool backward) {
  cuda::flash::Tiles<C> t;
  return cuda::flash::Tiles<C>::carve(t, nullptr, Rows, d.head_dim, d.v_dim, backward);
}

// The emulated outputs (out, lse, dq, dk, dv) against the CPU kernels'.
template <class T, class C>
void expect_attention(const std::vector<T>& out, const std::vector<C>& lse,
                      const std::vector<T>& dq, const std::vector<T>& dk, const std::vector<T>& dv,
                      const std::vector<Tensor>& want, const std::vector<Tensor>& want_grads,
                      Tol tol) {
  EXPECT_TRUE(all_close(as_double(out), want[0].to_vector<double>(), tol.rtol, tol.atol)) << "out";
  EXPECT_TRUE(all_close(as_double(lse), want[1].to_vector<double>(), tol.rtol, tol.atol)) << "lse";
  const char* names[] = {"dq", "dk", "dv"};
  const std::vector<T>* got[] = {&dq, &dk, &dv};
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(all_close(as_double(*got[i]), want_grads[size_t(i)].to_vector<double>(), tol.rtol,
                          tol.atol))
        << names[i];
}

template <class C, int Rows>
void check_attention(const AttentionCase& c, uint64_t seed) {
  using namespace cuda::flash;
  const DType dt = std::is_same_v<C, double> ? DType::f64 : DType::f32;
  SCOPED_TRACE(describe(c, dt) + " rows " + std::to_string(Rows));
  const ir::Attrs attrs = attention_attrs(c.head_dim, c.causal, c.window);
  const std::vector<Tensor> in = attention_inputs(c, dt, seed);
  std::vector<Tensor> bin = attention_backward_inputs(in, attrs, seed + 1);
  std::vector<Tensor> want = fused("flash_attention", attrs)(in);
  std::vector<Tensor> want_grads = fused("flash_attention_backward", attrs)(bin);
  AttentionRun<C> r(c, bin);
  const cuda::flash::Dims& d = r.d;

  std::vector<C> out(size_t(d.batch * d.q_heads * d.q_len * d.v_dim), C(-7));
  std::vector<C> lse(size_t(d.batch * d.q_heads * d.q_len), C(-7));
  const long long q_tiles = (d.q_len + Rows - 1) / Rows;
  emulated::launch(dim3(unsigned(d.batch * d.q_heads * q_tiles)), kThreads,
                   tile_bytes<C, Rows>(d, false), flash_forward_k<C, Rows>, r.q.data(), r.k.data(),
                   r.v.data(), r.docs(), out.data(), lse.data(), d, r.scale);

  std::vector<C> dq(r.q.size(), C(-7)), dk(r.k.size(), C(-7)), dv(r.v.size(), C(-7));
  const BackwardArgs args{r.q.data(), r.k.data(), r.v.data(), r.dout.data(), r.lse.data(),
                          r.delta.data(), r.docs(), dq.data(), dk.data(), dv.data()};
  const size_t bytes = tile_bytes<C, Rows>(d, true);
  emulated::launch(dim3(unsigned(d.batch * d.kv_heads * ((d.kv_len + kTileK - 1) / kTileK))),
                   kThreads, bytes, flash_backward_kv_k<C, Rows>, args, d, r.scale);
  emulated::launch(dim3(unsigned(d.batch * d.q_heads * q_tiles)), kThreads, bytes,
                   flash_backward_q_k<C, Rows>, args, d, r.scale);
  expect_attention(out, lse, dq, dk, dv, want, want_grads, tol_for(dt));
}

// The tensor-core kernels (bf16) against the CPU kernels.
void check_attention_tc(const AttentionCase& c, uint64_t seed) {
  using namespace cuda::flash;
  SCOPED_TRACE(describe(c, DType::bf16) + " tensor cores");
  const ir::Attrs attrs = attention_attrs(c.head_dim, c.causal, c.window);
  const std::vector<Tensor> in = attention_inputs(c, DType::bf16, seed);
  std::vector<Tensor> bin = attention_backward_inputs(in, attrs, seed + 1);
  std::vector<Tensor> want = fused("flash_attention", attrs)(in);
  std::vector<Tensor> want_grads = fused("flash_attention_backward", attrs)(bin);
  AttentionRun<bf16> r(c, bin);
  const cuda::flash::Dims& d = r.d;
  const bf16 junk = codegen::narrow<bf16>(-7.0f);
  std::vector<bf16> out(size_t(d.batch * d.q_heads * d.q_len * d.v_dim), junk);
  std::vector<float> lse(size_t(d.batch * d.q_heads * d.q_len), -7.0f);
  TcTiles<bf16> t;
  const long long q_tiles = (d.q_len + kTcTile - 1) / kTcTile;
  const long long k_tiles = (d.kv_len + kTcTile - 1) / kTcTile;
  emulated::launch(dim3(unsigned(d.batch * d.q_heads * q_tiles)), kThreads,
                   TcTiles<bf16>::carve(t, nullptr, d.head_dim, d.v_dim, false, d.v_dim, 0),
                   flash_forward_tc_k<bf16>, r.q.data(), r.k.data(), r.v.data(), r.docs(),
                   out.data(), lse.data(), d, r.scale);
  std::vector<bf16> dq(r.q.size(), junk), dk(r.k.size(), junk), dv(r.v.size(), junk);
  const BackwardArgs args{r.q.data(), r.k.data(), r.v.data(), r.dout.data(), r.lse.data(),
                          r.delta.data(), r.docs(), dq.data(), dk.data(), dv.data()};
  emulated::launch(dim3(unsigned(d.batch * d.kv_heads * k_tiles)), kThreads,
                   TcTiles<bf16>::carve(t, nullptr, d.head_dim, d.v_dim, true, d.head_dim, d.v_dim),
                   flash_backward_kv_tc_k<bf16>, args, d, r.scale);
  emulated::launch(dim3(unsigned(d.batch * d.q_heads * q_tiles)), kThreads,
                   TcTiles<bf16>::carve(t, nullptr, d.head_dim, d.v_dim, true, d.head_dim, 0),
                   flash_backward_q_tc_k<bf16>, args, d, r.scale);
  expect_attention(out, lse, dq, dk, dv, want, want_grads, tol_for(DType::bf16));
}

TEST(EmulatedFlashAttention, MatchesTheCpuKernelForEveryTileHeight) {
  // Tile edges, GQA/MQA, windows, queries at the end, packed and
  // interleaved documents.
  // (A block is 256 threads meeting at barriers on this machine's cores:
  // a few small cases keep the test to seconds.)
  const std::vector<AttentionCase>& cases = attention_cases();
  check_attention<float, 64>(cases[1], 1);
  check_attention<float, 16>(cases[2], 2);
  check_attention<float, 64>(cases[3], 3);
  check_attention<float, 32>({1, 2, 1, 100, 100, 8, 8, true, 40, 0}, 4);  // a window
  check_attention<float, 16>(cases[8], 5);
  check_attention<float, 64>({1, 2, 2, 100, 100, 8, 8, true, 0, 1}, 6);  // documents
  check_attention<float, 32>({1, 1, 1, 70, 70, 8, 8, false, 0, 2}, 7);   // interleaved ids
  check_attention<double, 16>(cases[1], 8);
}

TEST(EmulatedFlashAttention, TensorCoreKernelsMatchTheCpuKernel) {
  // batch, hq, hkv, sq, sk, d, dv, causal, window, docs
  check_attention_tc({1, 2, 2, 70, 70, 16, 16, false, 0, 0}, 1);
  check_attention_tc({1, 4, 2, 130, 130, 32, 16, true, 0, 0}, 2);   // GQA, v_dim != head_dim
  check_attention_tc({1, 2, 1, 40, 150, 16, 32, true, 50, 0}, 3);   // queries last, a window
  check_attention_tc({2, 2, 2, 140, 140, 16, 16, true, 0, 1}, 4);   // packed documents
  check_attention_tc({1, 1, 1, 80, 80, 16, 16, false, 0, 2}, 5);    // interleaved ids
}

// ---------------------------------------------------- linear cross-entropy

// The CUDA kernel's passes with the row kernels emulated and the products
// (cuBLASLt there) done on the CPU, over vocabulary tiles of `tile`
// columns, against the CPU kernel: loss, log-sum-exp, dh and dw.
void check_lce(const LceCase& c, int64_t tile, uint64_t seed) {
  using namespace cuda::lce;
  SCOPED_TRACE(describe(c, DType::f32) + " tile " + std::to_string(tile));
  const ir::Attrs attrs = lce_attrs(c);
  std::vector<Tensor> in = lce_inputs(c, DType::f32, seed);
  std::vector<Tensor> want = fused("linear_cross_entropy", attrs)(in);
  const int64_t N = c.rows, V = c.vocab;
  std::vector<int64_t> targets = in[2].to_vector<int64_t>();
  cuda::IndexFault fault{};
  const Targets t{targets.data(), true, c.ignore_index, V, &fault};
  const dim3 rows_grid(unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock));
  auto logits_of = [&](int64_t v0, int64_t width) {
    return matmul(in[0], in[1].slice(0, v0, v0 + width), false, true).to_vector<float>();
  };

  const size_t n_rows = static_cast<size_t>(N);
  std::vector<float> m(n_rows), l(n_rows), picked(n_rows), lse(n_rows), rows(n_rows);
  emulated::launch(dim3(2), 64, 0, start_rows_k<float>, m.data(), l.data(), picked.data(), N);
  for (int64_t v0 = 0; v0 < V; v0 += tile) {
    const int64_t width = std::min(tile, V - v0);
    std::vector<float> z = logits_of(v0, width);
    emulated::launch(rows_grid, 32 * kRowsPerBlock, 0, fold_tile_k<float>, z.data(), width, v0,
                     t, m.data(), l.data(), picked.data(), N);
  }
  const bool none = c.reduction == "none";
  std::vector<float> loss(none ? n_rows : 1);
  emulated::launch(dim3(2), 64, 0, finish_rows_k<float>, m.data(), l.data(), picked.data(), t,
                   lse.data(), none ? loss.data() : rows.data(), N);
  if (!none)
    emulated::launch(dim3(1), 32, 0, reduce_k<float>, rows.data(), t, c.reduction == "mean",
                     loss.data(), N);
  EXPECT_EQ(fault.set, 0u);
  const Tol tol = tol_for(DType::f32);
  EXPECT_TRUE(all_close(as_double(loss), want[0].to_vector<double>(), tol.rtol, tol.atol)) << "loss";
  EXPECT_TRUE(all_close(as_double(lse), want[1].to_vector<double>(), tol.rtol, tol.atol)) << "lse";

  // Backward: G per tile, then dh += G w_tile and dw_tile = G^T h on the CPU.
  Tensor dsoft = random_tensor({N}, DType::f32, seed + 7);
  Tensor dtarget = random_tensor({N}, DType::f32, seed + 8);
  std::vector<Tensor> bin{in[0], in[1], in[2], want[1], dsoft, dtarget};
  std::vector<Tensor> want_grads =
      fused("linear_cross_entropy_backward", {{"ignore_index", c.ignore_index}})(bin);
  std::vector<float> ds = dsoft.to_vector<float>(), dt = dtarget.to_vector<float>();
  Tensor dh = zeros({N, c.dim});
  std::vector<Tensor> dw_tiles;
  for (int64_t v0 = 0; v0 < V; v0 += tile) {
    const int64_t width = std::min(tile, V - v0);
    std::vector<float> z = logits_of(v0, width), g(z.size());
    emulated::launch(dim3(3), 64, 0, grad_tile_k<float, float>, z.data(), g.data(), width, v0, t,
                     lse.data(), ds.data(), dt.data(), N * width);
    Tensor gt = from_vector(g, {N, width});
    dh = dh + matmul(gt, in[1].slice(0, v0, v0 + width));
    dw_tiles.push_back(matmul(gt, in[0], true, false));
  }
  EXPECT_TRUE(all_close(dh, want_grads[0], tol.rtol, tol.atol)) << "dh";
  EXPECT_TRUE(all_close(concat(dw_tiles, 0), want_grads[1], tol.rtol, tol.atol)) << "dw";
}

TEST(EmulatedLinearCrossEntropy, RowKernelsMatchTheCpuKernel) {
  check_lce({37, 16, 100, "mean", -100, 5}, 40, 1);  // three tiles, the last narrow
  check_lce({70, 8, 90, "none", -100, 4}, 32, 2);    // rows over several blocks
  check_lce({65, 8, 50, "sum", 3, 6}, 50, 3);        // a class index as ignore_index
}

TEST(EmulatedLinearCrossEntropy, BadTargetsAreReported) {
  using namespace cuda::lce;
  std::vector<int64_t> targets{1, 9, 2};
  cuda::IndexFault fault{};
  const Targets t{targets.data(), true, -100, 5, &fault};
  std::vector<float> z(15, 0.5f), m(3), l(3), picked(3);
  emulated::launch(dim3(1), 32, 0, start_rows_k<float>, m.data(), l.data(), picked.data(), 3LL);
  emulated::launch(dim3(1), 32 * kRowsPerBlock, 0, fold_tile_k<float>, z.data(), 5LL, 0LL, t,
                   m.data(), l.data(), picked.data(), 3LL);
  EXPECT_EQ(fault.set, 1u);
  EXPECT_EQ(fault.value, 9);
  EXPECT_EQ(fault.position, 1);
  EXPECT_EQ(fault.op, int(cuda::IndexOp::linear_cross_entropy));
}

// ------------------------------------------------------- grouped matmul

struct Planned {
  std::vector<long long> buffer;
  cuda::grouped::Groups groups;
  cuda::IndexFault fault{};
  Planned(const std::vector<int64_t>& sizes, long long rows, cuda::IndexOp op)
      : buffer(2 * (sizes.size() + 1)) {
    const long long experts = (long long)sizes.size();
    groups = {buffer.data(), buffer.data() + experts + 1, experts};
    emulated::launch(dim3(1), 1, 0, cuda::grouped::plan_groups_k,
                     cuda::grouped::Sizes{sizes.data(), true}, groups, rows, &fault, int(op));
  }
};

template <class C>  // the storage type: f32, f64, or bf16 (tensor cores)
void check_grouped(const GroupCase& c, bool tw, uint64_t seed) {
  using namespace cuda::grouped;
  const DType dt = dtype_of<C>::value;
  SCOPED_TRACE(describe(c, tw, dt));
  std::vector<Tensor> in = group_inputs(c, tw, dt, seed);
  const std::vector<Tensor> want = fused("grouped_matmul", {{"transpose_w", tw}})(in);
  const long long rows = in[0].dim(0), k = c.k, n = c.n;
  std::vector<C> x = values<C>(in[0]), w = values<C>(in[1]), out(size_t(rows * n), C(-7.0f));
  Planned p(c.sizes, rows, cuda::IndexOp::grouped_matmul);
  ASSERT_EQ(p.fault.set, 0u);
  const long long row_tiles = (rows + kTile - 1) / kTile + p.groups.experts;
  if (n > 0 && row_tiles > 0)
    emulated::launch(dim3(unsigned(row_tiles), unsigned((n + kTile - 1) / kTile)), kThreads, 0,
                     grouped_k<C>, x.data(), w.data(), out.data(), p.groups, n, k, tw);
  emulated::launch(dim3(3), 64, 0, zero_padding_k<C>, out.data(), p.groups, n, rows * n);
  const Tol tol = tol_for(dt);
  EXPECT_TRUE(all_close(as_double(out), want[0].to_vector<double>(), tol.rtol, tol.atol));

  // The weight gradient of [rows, k] and [rows, n] operands: [E, k, n].
  std::vector<Tensor> wg = weight_grad_inputs(c, dt, seed + 1);
  const Tensor want_grad = fused("grouped_matmul_weight_grad", {})(wg)[0];
  std::vector<C> a = values<C>(wg[0]), b = values<C>(wg[1]);
  const long long E = p.groups.experts;
  std::vector<C> grad(size_t(E * k * n), C(-7.0f));
  if (E > 0 && k > 0 && n > 0)
    emulated::launch(dim3(unsigned(E * ((k + kTile - 1) / kTile)), unsigned((n + kTile - 1) / kTile)),
                     kThreads, 0, weight_grad_k<C>, a.data(), b.data(), grad.data(), p.groups, k, n);
  EXPECT_TRUE(all_close(as_double(grad), want_grad.to_vector<double>(), tol.rtol, tol.atol))
      << "weight gradient";
}

TEST(EmulatedGroupedMatmul, MatchesTheCpuKernel) {
  uint64_t seed = 1;
  for (size_t i : {1, 3, 4, 7, 8})
    for (bool tw : {true, false}) check_grouped<float>(group_cases()[i], tw, seed += 10);
  check_grouped<double>(group_cases()[2], true, 5);
  for (bool tw : {true, false}) {  // tensor cores
    check_grouped<bf16>(group_cases()[4], tw, 7);
    check_grouped<bf16>({random_sizes(5, 40, 9), 48, 80, 3}, tw, 8);
  }
  check_grouped<float>({random_sizes(5, 70, 9), 70, 130, 3}, false, 6);  // tiles cut by K and N
}

TEST(EmulatedGroupedMatmul, PlanningReportsBadSizes) {
  Planned fine({3, 0, 2}, 7, cuda::IndexOp::grouped_matmul);
  EXPECT_EQ(fine.fault.set, 0u);
  EXPECT_EQ(fine.buffer, (std::vector<long long>{0, 3, 3, 5, 0, 1, 1, 2}));
  Planned over({3, 3}, 5, cuda::IndexOp::grouped_matmul);
  EXPECT_EQ(over.fault.set, 1u);
  EXPECT_EQ(over.fault.position, 1);
  EXPECT_EQ(over.fault.value, 3);
  EXPECT_EQ(over.fault.size, 2);
  EXPECT_EQ(over.buffer[2], 3) << "the bad group reads as empty";
  Planned negative({2, -1, 1}, 5, cuda::IndexOp::grouped_matmul_weight_grad);
  EXPECT_EQ(negative.fault.position, 1);
  EXPECT_EQ(negative.fault.value, -1);
  EXPECT_EQ(negative.fault.op, int(cuda::IndexOp::grouped_matmul_weight_grad));
}

}  // namespace
}  // namespace kiln
