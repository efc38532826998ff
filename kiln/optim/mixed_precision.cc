#include "kiln/optim/mixed_precision.h"

#include "kiln/base/error.h"

namespace kiln::optim {
namespace {

std::vector<Tensor> cast_all(const std::vector<Tensor>& xs, DType dtype) {
  std::vector<Tensor> out;
  out.reserve(xs.size());
  for (const auto& x : xs) out.push_back(x.dtype() == dtype ? x : x.to(dtype));
  return out;
}

}  // namespace

MixedPrecisionPolicy MixedPrecisionPolicy::from_name(std::string_view name) {
  MixedPrecisionPolicy p;
  if (name == "f32" || name == "float32") p.param_dtype = DType::f32;
  else if (name == "bf16" || name == "bfloat16") p.param_dtype = DType::bf16;
  else if (name == "f16" || name == "float16") p.param_dtype = DType::f16;
  else fail("unknown mixed precision dtype '", name, "': expected float32, bfloat16 or float16");
  return p;
}

std::vector<Tensor> MixedPrecisionPolicy::compute_params(const std::vector<Tensor>& masters) const {
  return cast_all(masters, param_dtype);
}

std::vector<Tensor> MixedPrecisionPolicy::master_params(const std::vector<Tensor>& params) const {
  return cast_all(params, master_dtype);
}

}  // namespace kiln::optim
