// Compiled programs recorded as CUDA graphs (Backend::record): the work a
// run issues on the device's stream is captured once, instantiated, and
// launched as one graph at each replay, so no host work runs between its
// kernels.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "kiln/runtime/backend.h"

namespace kiln::cuda {

// Captures what `work` issues on the calling queue thread's stream; nothing
// runs now. The capture is thread-local and strict: a call of this thread
// that a graph cannot hold (a synchronisation, a read back to the host)
// fails the recording with CUDA's error instead of being left out of it.
// A graph dropped by a holder (drop_graph) runs `work` under a capture
// again at its next replay.
std::unique_ptr<RecordedWork> capture_graph(std::function<void()> work);

// For work a graph being captured on the calling thread holds that its
// owner must watch at each replay (NCCL's collectives, whose group times
// them out). Both run on the replaying thread. Outside a capture,
// watch_replays is a kiln::Error.
struct ReplayWatch {
  // May throw (the graph is then not launched) or drop the graph (it is
  // then captured anew).
  std::function<void()> before_launch;
  std::function<void()> after_launch;
};
class GraphInstance;  // a captured graph's instantiation (cuda_graph.cc)
// Returns the graph being captured, for drop_graph.
std::weak_ptr<GraphInstance> watch_replays(ReplayWatch watch);
// Frees a graph's instantiation (a replay already launched finishes first)
// where it still exists, or, for a graph still being captured, the one its
// capture makes: NCCL neither destroys nor aborts a communicator while a
// graph holds its collectives. Its next replay captures it anew.
void drop_graph(const std::weak_ptr<GraphInstance>& graph);

// Whether the calling thread is capturing a CUDA graph on `device`.
bool capturing_on(int device);

// Held by a thread that puts work on a device's stream from outside its
// queue thread (a host upload) or synchronises the device (cudaFree): such
// work would land in a graph being captured there, or break the capture,
// so it waits for the capture to end. On the capturing thread itself it is
// a kiln::Error: the call cannot be part of a graph.
class CaptureExclusion {
 public:
  CaptureExclusion(int device, const char* what);
  ~CaptureExclusion();
  CaptureExclusion(const CaptureExclusion&) = delete;
  CaptureExclusion& operator=(const CaptureExclusion&) = delete;

 private:
  int device_;
};

// While alive, the calling thread may make calls a capture forbids
// (cudaMalloc for a recording's private pool, whose blocks the graph keeps).
class RelaxedCapture {
 public:
  RelaxedCapture();
  ~RelaxedCapture();
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  int previous_;  // cudaStreamCaptureMode
};

}  // namespace kiln::cuda
