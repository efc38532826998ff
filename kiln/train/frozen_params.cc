#include "kiln/train/frozen_params.h"

#include "kiln/base/error.h"

namespace kiln::train {

std::vector<Tensor> FrozenParams::merge(const std::vector<Tensor>& trained,
                                        const std::vector<Tensor>& frozen_values) const {
  std::vector<Tensor> out;
  out.reserve(frozen.size());
  size_t t = 0, f = 0;
  for (bool is_frozen : frozen) {
    const std::vector<Tensor>& from = is_frozen ? frozen_values : trained;
    size_t& next = is_frozen ? f : t;
    KILN_CHECK(next < from.size(), "frozen parameters: ", trained.size(), " trained and ",
               frozen_values.size(), " frozen tensors for a model of ", frozen.size());
    out.push_back(from[next++]);
  }
  KILN_CHECK(t == trained.size() && f == frozen_values.size(), "frozen parameters: ",
             trained.size(), " trained and ", frozen_values.size(),
             " frozen tensors for a model of ", frozen.size());
  return out;
}

}  // namespace kiln::train
