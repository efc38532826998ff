#include "kiln/backend/cuda/scratch.h"

#include <algorithm>

#include "kiln/backend/cuda/stream.h"
#include "kiln/runtime/backend.h"

namespace kiln::cuda {

Scratch::Scratch(size_t bytes)
    : storage_(std::make_unique<Storage>(Device{DeviceKind::cuda, current_device()},
                                         std::max<size_t>(bytes, 1))) {}
Scratch::~Scratch() = default;
Scratch::Scratch(Scratch&&) noexcept = default;
Scratch& Scratch::operator=(Scratch&&) noexcept = default;

void* Scratch::data() const { return storage_->data; }

}  // namespace kiln::cuda
