// The cross_entropy op: declaration and composite.
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/cross_entropy.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"

namespace kiln {
namespace ops {
namespace {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
    case Reduction::none: return "none";
  }
  return "mean";
}

const OpDef& kCrossEntropy = declare({
    .name = "cross_entropy",
    .num_inputs = 2,
    .attrs = {{"ignore_index", AttrKind::int_, int64_t{-100}},
              {"reduction", AttrKind::string, std::string("mean")}},
    .infer = [](auto in, const Attrs& a) {
      const TypeInfo &logits = in[0], &targets = in[1];
      KILN_CHECK(is_floating(logits.dtype) && logits.shape.size() >= 1,
                 "cross_entropy: logits must be a floating [..., classes] tensor, got ",
                 ir::to_string(logits));
      Shape batch = logits.shape;
      batch.erase(batch.size() - 1);
      KILN_CHECK(is_integer(targets.dtype) && targets.shape == batch,
                 "cross_entropy: targets must be i32 or i64 shaped ", batch, " for logits ",
                 ir::to_string(logits), ", got ", ir::to_string(targets));
      const std::string& r = a.s("reduction");
      KILN_CHECK(r == "mean" || r == "sum" || r == "none", "cross_entropy: unknown reduction '",
                 r, "'; use mean, sum or none");
      return std::vector<TypeInfo>{
          {compute_dtype(logits.dtype), r == "none" ? batch : Shape{}}};
    },
    .composite = [](CompositeCall& c) {
      const Tensor &logits = c.inputs[0], &targets = c.inputs[1];
      DType cd = compute_dtype(logits.dtype());
      Device dev = logits.device();
      Tensor lf = logits.to(cd);
      Tensor valid =
          ne(targets, scalar(double(c.attrs.i("ignore_index")), targets.dtype(), dev));
      // Ignored targets read class 0 so that gather's range check passes.
      Tensor safe = where(valid, targets, scalar(0, targets.dtype(), dev));
      Tensor picked = gather(lf, -1, safe.unsqueeze(-1)).squeeze(-1);
      Tensor loss = where(valid, logsumexp(lf, {-1}) - picked, scalar(0, cd, dev));
      const std::string& r = c.attrs.s("reduction");
      if (r == "sum") loss = sum(loss);
      else if (r == "mean") loss = sum(loss) / sum(valid.to(cd));
      c.outputs = {loss};
    },
});

}  // namespace
}  // namespace ops

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     Reduction reduction) {
  return apply1(
      ops::kCrossEntropy, {logits, targets},
      {{"ignore_index", ignore_index}, {"reduction", std::string(ops::reduction_name(reduction))}});
}

}  // namespace kiln
