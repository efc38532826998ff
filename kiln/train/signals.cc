#include "kiln/train/signals.h"

#include <csignal>

namespace kiln::train {
namespace {

volatile std::sig_atomic_t g_signal = 0;
// SIGHUP too: a closed terminal or a scheduler's hangup must save, not kill.
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];

void on_signal(int sig) {
  g_signal = sig;
  for (int s : kSignals) std::signal(s, SIG_DFL);
}

}  // namespace

StopSignals::StopSignals() {
  g_signal = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_old[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
}

int StopSignals::received() const { return g_signal; }

}  // namespace kiln::train
