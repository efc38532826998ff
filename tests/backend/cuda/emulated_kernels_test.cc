// kiln's hand-written CUDA kernels run on the CPU (emulated.h: real
// threads and barriers per block) against the CPU kernels of the same ops,
// so their indexing, masking, tiling and synchronisation are checked where
// there is no GPU (the cuda-labelled tests check them on one): flash
// attention forward and backward for every query tile height, and grouped
// matmul's planning, products (tensor-core fragments for bf16, scalar
// FMAs for f32/f64), padding and size checks.
#include "tests/backend/cuda/emulated.h"  // first: the kernels compile for the host

#include "kiln/backend/cuda/kernels/flash_attention.cuh"
#include "kiln/backend/cuda/kernels/flash_attention_tc.cuh"
#include "kiln/backend/cuda/kernels/grouped_matmul.cuh"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/fused_checks.h"
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
