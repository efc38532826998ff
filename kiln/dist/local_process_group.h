// A group of one process, with no communication at all: every collective
// is a copy of the input (run_alone). The world of a run not started by
// mpirun, and its mesh dimensions.
#pragma once
#include "kiln/dist/process_group.h"

namespace kiln::dist {

class LocalProcessGroup final : public ProcessGroup {
 public:
  LocalProcessGroup(std::string name, std::chrono::milliseconds timeout)
      : ProcessGroup(0, 1, std::move(name), {0}, timeout) {}

 protected:
  Work start(Collective c) override { return run_alone(c); }
  std::shared_ptr<ProcessGroup> split_group(int color, int key, std::string name) override {
    return std::make_shared<LocalProcessGroup>(std::move(name), timeout());
  }
};

}  // namespace kiln::dist
