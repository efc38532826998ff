#include "kiln/backend/cuda/cuda_graph.h"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <mutex>
#include <thread>
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

// The watchers of the graph this thread is capturing; null when none is.
Watchers*& capturing_watchers() {
  thread_local Watchers* w = nullptr;
  return w;
}

class CudaGraph final : public RecordedWork {
 public:
  CudaGraph(cudaGraphExec_t exec, Watchers watchers)
      : exec_(exec), watchers_(std::move(watchers)) {}
  // A graph still running is freed when it completes.
  ~CudaGraph() override { (void)cudaGraphExecDestroy(exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  void replay() override {
    for (const ReplayWatch& w : watchers_) w.before_launch();
    KILN_CUDA_CHECK(cudaGraphLaunch(exec_, current_stream()));
    for (const ReplayWatch& w : watchers_) w.after_launch();
  }

 private:
  cudaGraphExec_t exec_;
  Watchers watchers_;
};

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

}  // namespace

std::unique_ptr<RecordedWork> capture_graph(const std::function<void()>& work) {
  cudaStream_t s = current_stream();
  DeviceCapture& capture = capture_of(current_device());
  std::lock_guard lock(capture.mu);
  capture.capturer = std::this_thread::get_id();
  Watchers watchers;
  capturing_watchers() = &watchers;
  struct Clear {
    DeviceCapture& c;
    ~Clear() {
      c.capturer = std::thread::id();
      capturing_watchers() = nullptr;
    }
  } clear{capture};
  KILN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaError_t err = cudaSuccess;
  try {
    work();
  } catch (...) {
    end_capture(s, err);
    throw;
  }
  cudaGraph_t graph = end_capture(s, err);
  if (!graph)
    fail("capturing it as a CUDA graph failed (", cudaGetErrorString(err),
         "): one of its kernels made a call a graph cannot hold, such as a synchronisation "
         "or a read back to the host");
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail("instantiating its CUDA graph failed: ", cudaGetErrorString(err));
  }
  return std::make_unique<CudaGraph>(exec, std::move(watchers));
}

void watch_replays(ReplayWatch watch) {
  Watchers* w = capturing_watchers();
  KILN_CHECK(w, "watch_replays: this thread is not capturing a CUDA graph");
  w->push_back(std::move(watch));
}

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
