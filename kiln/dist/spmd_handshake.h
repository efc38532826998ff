// The SPMD handshake. Every rank must run the same program, collectives in
// the same order; a rank whose graph differs (rank-dependent control flow,
// a different config) would otherwise deadlock in a collective or mix
// unrelated data. With KILN_SPMD_HANDSHAKE the ranks first agree on their
// graph's fingerprint:
//   off       no check (the default: it costs a trace and a collective)
//   compile   once, before the first run of a program (the trainer: before its first step)
//   dispatch  before every run (every step)
// and a mismatch is an error on every rank, naming the ranks and the first
// node that differs, never a hang.
#pragma once
#include <string>

#include "kiln/dist/process_group.h"
#include "kiln/ir/graph.h"

namespace kiln::dist {

enum class Handshake { off, compile, dispatch };

// From KILN_SPMD_HANDSHAKE (unset: off); another value is a kiln::Error listing the choices.
Handshake handshake_mode();

// Collective over `group`: returns when every member's `g` has the same
// fingerprint, else throws (on every member) a kiln::Error saying which
// ranks hold which graph and the first line of the text form (ir::to_text)
// that differs. `what` names the program, e.g. "the training step".
void spmd_handshake(ProcessGroup& group, const ir::Graph& g, const std::string& what);

}  // namespace kiln::dist
