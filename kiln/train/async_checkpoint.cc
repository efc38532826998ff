#include "kiln/train/async_checkpoint.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/base/profile.h"

namespace kiln::train {

AsyncCheckpointer::~AsyncCheckpointer() {
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: the checkpoint being saved in the background failed: %s\n",
                 e.what());
  }
}

std::optional<AsyncCheckpointer::Saved> AsyncCheckpointer::start(
    const CheckpointData& data, std::function<std::string(const CheckpointData&)> save) {
  std::optional<Saved> before = wait();
  const auto began = std::chrono::steady_clock::now();
  copy_ = data.on_host(std::move(copy_));
  pending_ = std::async(std::launch::async, [this, began, save = std::move(save)] {
    profile::set_thread_name("checkpoint");
    Saved s{copy_.step, "", 0};
    try {
      s.path = save(copy_);
    } catch (const Error& e) {
      fail("saving checkpoint step ", s.step, " in the background: ", e.what());
    }
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return s;
  });
  return before;
}

int64_t AsyncCheckpointer::copy_bytes() const {
  int64_t n = 0;
  if (copy_.host)
    for (const NamedHostTensors* part : {&copy_.host->model, &copy_.host->optimizer})
      for (const auto& [name, t] : *part) n += int64_t(t.nbytes());
  return n;
}

bool AsyncCheckpointer::finished() const {
  return pending_.valid() &&
         pending_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

std::optional<AsyncCheckpointer::Saved> AsyncCheckpointer::wait() {
  if (!pending_.valid()) return std::nullopt;
  return pending_.get();  // rethrows the save's error; pending_ is then empty
}

}  // namespace kiln::train
