#include "kiln/backend/cuda/cuda_graph.h"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

// A device's capture: held by the capturing thread from its start to its end.
struct DeviceCapture {
  std::mutex mu;
  std::atomic<std::thread::id> capturer{};
};
constexpr int kMaxDevices = 64;
DeviceCapture& capture_of(int device) {
  static auto* captures = new std::array<DeviceCapture, kMaxDevices>;  // never destroyed
  KILN_CHECK(device >= 0 && device < kMaxDevices, "cuda:", device, ": kiln handles ", kMaxDevices,
             " GPUs per process");
  return (*captures)[size_t(device)];
}

using Watchers = std::vector<ReplayWatch>;

}  // namespace

// A captured graph's instantiation, freed by its last holder: the graph
// instance, or a replay launching it (so a drop from another thread never
// frees it under a launch).
struct GraphExec {
  cudaGraphExec_t exec = nullptr;
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  // A graph still running is freed when it completes.
  ~GraphExec() {
    if (exec) (void)cudaGraphExecDestroy(exec);
  }
};

class GraphInstance {
 public:
  // What a replay launches; null until installed, and once dropped.
  std::shared_ptr<GraphExec> exec() {
    std::lock_guard lock(mu_);
    return exec_;
  }
  bool dropped() {
    std::lock_guard lock(mu_);
    return dropped_;
  }
  // Keeps a capture's instantiation, unless the graph was dropped while it
  // was being captured: then it is freed here.
  void install(std::shared_ptr<GraphExec> e) {
    std::lock_guard lock(mu_);
    if (!dropped_) exec_ = std::move(e);
  }
  void drop() {
    std::shared_ptr<GraphExec> gone;  // freed outside the lock
    std::lock_guard lock(mu_);
    dropped_ = true;
    gone.swap(exec_);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<GraphExec> exec_;
  bool dropped_ = false;
};

namespace {

// One capture of a graph: its instantiation and the replay watchers of
// the work it holds.
struct Capture {
  std::shared_ptr<GraphInstance> instance = std::make_shared<GraphInstance>();
  Watchers watchers;
};

// The capture under way on this thread; null when none is.
Capture*& capturing() {
  thread_local Capture* c = nullptr;
  return c;
}

// Whether err is the capture's own failure (a call a graph cannot hold),
// not the device's.
bool capture_error(cudaError_t err) {
  switch (err) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
    case cudaErrorNotPermitted: return true;
    default: return false;
  }
}

// Ends the capture on `s`, however it went: the graph, or null with `err`.
cudaGraph_t end_capture(cudaStream_t s, cudaError_t& err) {
  cudaGraph_t graph = nullptr;
  err = cudaStreamEndCapture(s, &graph);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // capture errors are not sticky
    if (graph) (void)cudaGraphDestroy(graph);
    return nullptr;
  }
  return graph;
}

Capture capture(const std::function<void()>& work) {
  cudaStream_t s = current_stream();
  DeviceCapture& device = capture_of(current_device());
  std::lock_guard lock(device.mu);
  device.capturer = std::this_thread::get_id();
  Capture made;
  capturing() = &made;
  struct Clear {
    DeviceCapture& d;
    ~Clear() {
      d.capturer = std::thread::id();
      capturing() = nullptr;
    }
  } clear{device};
  KILN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaError_t err = cudaSuccess;
  try {
    work();
  } catch (...) {
    if (cudaGraph_t graph = end_capture(s, err)) (void)cudaGraphDestroy(graph);
    throw;
  }
  cudaGraph_t graph = end_capture(s, err);
  if (!graph && capture_error(err))
    fail("capturing it as a CUDA graph failed (", cudaGetErrorString(err),
         "): one of its kernels made a call a graph cannot hold, such as a synchronisation "
         "or a read back to the host");
  if (!graph)  // a sticky error of earlier work, say
    fail("capturing it as a CUDA graph failed: the device reports ", cudaGetErrorString(err));
  auto exec = std::make_shared<GraphExec>();
  err = cudaGraphInstantiateWithFlags(&exec->exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail("instantiating its CUDA graph failed: ", cudaGetErrorString(err));
  }
  // Dropped during the capture (a group holding its work was aborted):
  // freed now, and captured anew at the replay.
  made.instance->install(std::move(exec));
  return made;
}

class CudaGraph final : public RecordedWork {
 public:
  CudaGraph(std::function<void()> work, Capture first)
      : work_(std::move(work)), capture_(std::move(first)) {}
  void replay() override {
    while (true) {
      if (capture_.instance->dropped()) capture_ = capture(work_);
      for (const ReplayWatch& w : capture_.watchers) w.before_launch();
      std::shared_ptr<GraphExec> exec = capture_.instance->exec();
      if (!exec) continue;  // dropped since
      KILN_CUDA_CHECK(cudaGraphLaunch(exec->exec, current_stream()));
      exec.reset();
      for (const ReplayWatch& w : capture_.watchers) w.after_launch();
      return;
    }
  }

 private:
  std::function<void()> work_;
  Capture capture_;
};

}  // namespace

std::unique_ptr<RecordedWork> capture_graph(std::function<void()> work) {
  Capture first = capture(work);
  return std::make_unique<CudaGraph>(std::move(work), std::move(first));
}

std::weak_ptr<GraphInstance> watch_replays(ReplayWatch watch) {
  Capture* c = capturing();
  KILN_CHECK(c, "watch_replays: this thread is not capturing a CUDA graph");
  c->watchers.push_back(std::move(watch));
  return c->instance;
}

void drop_graph(const std::weak_ptr<GraphInstance>& graph) {
  if (std::shared_ptr<GraphInstance> g = graph.lock()) g->drop();
}

bool capturing_on(int device) { return capture_of(device).capturer == std::this_thread::get_id(); }

CaptureExclusion::CaptureExclusion(int device, const char* what) : device_(device) {
  DeviceCapture& capture = capture_of(device);
  if (capture.capturer == std::this_thread::get_id())
    fail(what, " on cuda:", device, " while a compiled program is captured there as a CUDA graph: "
         "a graph cannot hold it");
  capture.mu.lock();
}

CaptureExclusion::~CaptureExclusion() { capture_of(device_).mu.unlock(); }

RelaxedCapture::RelaxedCapture() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  previous_ = int(mode);
}

RelaxedCapture::~RelaxedCapture() {
  auto mode = cudaStreamCaptureMode(previous_);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace kiln::cuda
