// The execution ladder as a user runs it (`kiln train` on the grammar
// corpus, 20 steps of 32 tokens): its rungs' flags, a run's losses and
// gradient norms, and the device ladder that the CPU's host devices and
// the GPU tests share.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/train_run.h"

namespace kiln::test {

struct Rung {
  std::string name, flags, execution;  // execution: how the run's header names it
};

// Every rung's flags set the whole ladder, whatever the recipe chose; the
// first is strict eager, the fourth the graph trainer.
const std::vector<Rung>& ladder_rungs();
const Rung& ladder_rung(const std::string& name);

// 20 steps of `recipe` with `flags` on <root>/corpus.txt (write_grammar_corpus)
// into <root>/<name>, `env` ("NAME=value ...") set for the run, whose header
// must name the rung `execution` (so no rung silently runs another).
Curve train_curve(const std::filesystem::path& root, const std::string& recipe,
                  const std::string& name, const std::string& flags, const std::string& execution,
                  const std::string& env = "");

void expect_identical(const Curve& a, const Curve& b, const std::string& what);

// `rungs` of `recipe` with --training.device `device` (under `env`): each
// gives the first's bits, its header names the device ("cuda" is cuda:0:
// one rank), and the first
// agrees with strict eager on the CPU to `tolerance` relative in every
// step's loss and gradient norm (0: bit for bit).
void expect_device_ladder(const std::filesystem::path& root, const std::string& recipe,
                          const std::string& device, const std::string& env,
                          const std::vector<Rung>& rungs, double tolerance);

}  // namespace kiln::test
