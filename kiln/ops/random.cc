#include "kiln/ops/random.h"

#include <cmath>

#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace ops {
namespace {

// Every random op: shape, dtype, and the Philox key (seed) and first counter
// (offset), stored as int64 bit patterns of the uint64 values.
std::vector<ir::AttrSpec> random_attrs(DType dtype, std::vector<ir::AttrSpec> params) {
  std::vector<ir::AttrSpec> a = {{"shape", AttrKind::ints, std::nullopt},
                                 {"dtype", AttrKind::dtype, dtype},
                                 {"seed", AttrKind::int_, std::nullopt},
                                 {"offset", AttrKind::int_, int64_t{0}}};
  a.insert(a.end(), params.begin(), params.end());
  return a;
}

std::vector<TypeInfo> random_type(const Attrs& a, const char* op, bool floating_only) {
  Shape s(a.ints("shape"));
  for (int64_t d : s) KILN_CHECK(d >= 0, op, ": negative size in shape ", s);
  DType t = a.dtype("dtype");
  KILN_CHECK(!floating_only || is_floating(t), op, ": dtype must be floating, got ",
             dtype_name(t));
  return {{t, s}};
}

const OpDef& kUniform = declare({
    .name = "random_uniform",
    .num_inputs = 0,
    .attrs = random_attrs(DType::f32, {{"low", AttrKind::float_, 0.0},
                                       {"high", AttrKind::float_, 1.0}}),
    .infer = [](auto, const Attrs& a) {
      double low = a.f("low"), high = a.f("high");
      KILN_CHECK(std::isfinite(low) && std::isfinite(high) && low < high,
                 "random_uniform: needs finite low < high, got [", low, ", ", high, ")");
      return random_type(a, "random_uniform", true);
    },
});

const OpDef& kNormal = declare({
    .name = "random_normal",
    .num_inputs = 0,
    .attrs = random_attrs(DType::f32, {{"mean", AttrKind::float_, 0.0},
                                       {"std", AttrKind::float_, 1.0}}),
    .infer = [](auto, const Attrs& a) {
      double mean = a.f("mean"), stddev = a.f("std");
      KILN_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0,
                 "random_normal: needs a finite mean and std >= 0, got mean ", mean, ", std ",
                 stddev);
      return random_type(a, "random_normal", true);
    },
});

const OpDef& kBernoulli = declare({
    .name = "bernoulli",
    .num_inputs = 0,
    .attrs = random_attrs(DType::b8, {{"p", AttrKind::float_, std::nullopt}}),
    .infer = [](auto, const Attrs& a) {
      double p = a.f("p");
      KILN_CHECK(p >= 0 && p <= 1, "bernoulli: p must be in [0, 1], got ", p);
      return random_type(a, "bernoulli", false);
    },
});

// Runs random op `op` with the generator's next shape.numel() counters. The
// offset advances only once the op is accepted.
Tensor draw(const OpDef& op, const Shape& shape, Generator& g, DType dtype, Device device,
            ir::Attrs attrs) {
  attrs.set("shape", shape.vec());
  attrs.set("dtype", dtype);
  attrs.set("seed", static_cast<int64_t>(g.seed()));
  attrs.set("offset", static_cast<int64_t>(g.offset()));
  Tensor out = apply1(op, {}, attrs, device);
  g.advance(uint64_t(shape.numel()));
  return out;
}

}  // namespace
}  // namespace ops

Tensor uniform(const Shape& shape, double low, double high, Generator& g, DType dtype,
               Device device) {
  return ops::draw(ops::kUniform, shape, g, dtype, device, {{"low", low}, {"high", high}});
}

Tensor rand(const Shape& shape, Generator& g, DType dtype, Device device) {
  return uniform(shape, 0, 1, g, dtype, device);
}

Tensor normal(const Shape& shape, double mean, double stddev, Generator& g, DType dtype,
              Device device) {
  return ops::draw(ops::kNormal, shape, g, dtype, device, {{"mean", mean}, {"std", stddev}});
}

Tensor randn(const Shape& shape, Generator& g, DType dtype, Device device) {
  return normal(shape, 0, 1, g, dtype, device);
}

Tensor bernoulli(const Shape& shape, double p, Generator& g, DType dtype, Device device) {
  return ops::draw(ops::kBernoulli, shape, g, dtype, device, {{"p", p}});
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  KILN_CHECK(p >= 0 && p <= 1, "dropout: p must be in [0, 1], got ", p);
  KILN_CHECK(is_floating(x.dtype()), "dropout: x must be floating, got ",
             ir::to_string(x.type()));
  if (p == 0) return x;
  if (p == 1) return zeros_like(x);
  Generator g(seed, offset);
  // The mask is a constant of the graph, so the gradient x -> keep * scale
  // multiplies by the very same mask.
  Tensor keep = bernoulli(x.shape(), 1 - p, g, x.dtype(), x.device());
  return x * keep * (1 / (1 - p));
}

Tensor dropout(const Tensor& x, double p, Generator& g) {
  Tensor out = dropout(x, p, g.seed(), g.offset());
  g.advance(uint64_t(x.numel()));
  return out;
}

}  // namespace kiln
