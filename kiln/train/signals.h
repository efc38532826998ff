// SIGINT / SIGTERM / SIGHUP during training: the first one is recorded (the trainer
// finishes the step, saves and exits); the handlers are then the defaults
// again, so a second signal ends the process at once (checkpoints are
// atomic, so nothing half-written is ever loaded).
#pragma once

namespace kiln::train {

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received (SIGINT, SIGTERM or SIGHUP), or 0.
  int received() const;
};

}  // namespace kiln::train
