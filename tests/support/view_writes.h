// The in-place-write-through-view patterns of tests/oracle/gen_view_writes.py
// written step by step, the modes they run in, and how a pattern runs in a
// mode. Shared by the torch oracle suite and the CUDA suite (against the CPU).
#pragma once
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/runtime/context.h"
#include "kiln/runtime/tensor.h"

namespace kiln::test {

// A pattern: writes through views of b (a fresh copy of the input x) and s.
using ViewWriteBody = std::function<std::vector<Tensor>(Tensor b, const Tensor& s)>;
const std::map<std::string, ViewWriteBody>& view_write_patterns();

enum class WriteMode { strict, debug, defer, compiled, grad_strict, grad_defer, grad_compiled };
inline constexpr WriteMode kAllWriteModes[] = {
    WriteMode::strict,      WriteMode::debug,      WriteMode::defer,        WriteMode::compiled,
    WriteMode::grad_strict, WriteMode::grad_defer, WriteMode::grad_compiled};
const char* mode_name(WriteMode m);
bool differentiates(WriteMode m);
bool traced(WriteMode m);
EagerMode eager_mode_of(WriteMode m);
void PrintTo(WriteMode m, std::ostream* os);  // gtest names it

// The pattern's outputs on args {x, s} and, in the differentiating modes,
// the gradients of x and s of loss = sum(outs[i] * cots[i]).
struct ViewWriteRun {
  std::vector<Tensor> outs, grads;
};
ViewWriteRun run_view_write(const ViewWriteBody& body, WriteMode mode,
                            const std::vector<Tensor>& args, const std::vector<Tensor>& cots);

}  // namespace kiln::test
