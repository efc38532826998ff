// Random draws on CUDA against the CPU's (the same Philox stream,
// kiln/base/philox.h): uniform and bernoulli draws are exact arithmetic,
// normal draws run the same IEEE-exact Box-Muller code (kiln/base/
// box_muller.h), so all must equal the CPU's bit for bit. Drawing again with
// the same seed gives the same bits.
#include <gtest/gtest.h>

#include <bit>
#include <vector>

#include "kiln/ops/random.h"

namespace kiln {
namespace {

constexpr Device kGPU{DeviceKind::cuda, 0};
constexpr DType kFloats[] = {DType::f32, DType::bf16, DType::f16, DType::f64};

// 1000 x 37 elements (not a multiple of any block); the offset crosses 2^32,
// so the counter's high word changes inside the draw.
const Shape kShape{1000, 37};
constexpr uint64_t kSeed = 0x9e3779b97f4a7c15ull, kOffset = 0xffffff00ull;

// The values' exact bits (every element converts to double exactly; -0
// and +0 differ).
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to(kCPU).to_vector<double>()) out.push_back(std::bit_cast<uint64_t>(v));
  return out;
}

TEST(RandomCuda, UniformEqualsCpuBitForBit) {
  for (DType dt : kFloats)
    for (auto [low, high] : {std::pair{0.0, 1.0}, std::pair{-3.0, 5.0}, std::pair{1.0, 1.0009765625}}) {
      Generator cpu(kSeed, kOffset), gpu(kSeed, kOffset);
      Tensor want = uniform(kShape, low, high, cpu, dt, kCPU);
      Tensor got = uniform(kShape, low, high, gpu, dt, kGPU);
      EXPECT_EQ(got.device(), kGPU);
      EXPECT_EQ(bits(got), bits(want)) << dtype_name(dt) << " [" << low << ", " << high << ")";
      EXPECT_EQ(gpu.offset(), cpu.offset());
    }
}

TEST(RandomCuda, BernoulliEqualsCpuBitForBit) {
  for (DType dt : {DType::b8, DType::f32, DType::bf16, DType::i64})
    for (double p : {0.0, 0.3, 1.0}) {
      Generator cpu(kSeed, kOffset), gpu(kSeed, kOffset);
      EXPECT_EQ(bits(bernoulli(kShape, p, gpu, dt, kGPU)), bits(bernoulli(kShape, p, cpu, dt, kCPU)))
          << dtype_name(dt) << " p " << p;
    }
}

TEST(RandomCuda, NormalEqualsCpuBitForBit) {
  for (DType dt : kFloats) {
    Generator cpu(kSeed, kOffset), gpu(kSeed, kOffset);
    Tensor want = normal(kShape, 0.5, 2.0, cpu, dt, kCPU);
    Tensor got = normal(kShape, 0.5, 2.0, gpu, dt, kGPU);
    EXPECT_EQ(bits(got), bits(want)) << dtype_name(dt);
  }
}

TEST(RandomCuda, SameSeedSameBitsRunAfterRun) {
  for (DType dt : kFloats) {
    Generator a(kSeed), b(kSeed);
    Tensor first = normal(kShape, 0, 1, a, dt, kGPU);
    Tensor second = normal(kShape, 0, 1, b, dt, kGPU);
    EXPECT_EQ(bits(first), bits(second)) << dtype_name(dt);
    Generator c(kSeed), d(kSeed);
    EXPECT_EQ(bits(uniform(kShape, -1, 1, c, dt, kGPU)), bits(uniform(kShape, -1, 1, d, dt, kGPU)))
        << dtype_name(dt);
  }
}

}  // namespace
}  // namespace kiln
