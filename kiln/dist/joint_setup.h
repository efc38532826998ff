// Setup steps that every member of a group takes together, such as making
// a communicator: a library call that waits inside for its peers and has
// no timeout of its own, so a member that dies during it would leave the
// others waiting for ever. joint_setup bounds the wait by the group's
// timeout and gives every member the same outcome: all go on, or all raise
// an error naming the members whose step failed, and why.
#pragma once
#include <functional>
#include <string>

#include "kiln/dist/process_group.h"

namespace kiln::dist {

// Exchanges over `group` each member's `problem` (empty: its step
// succeeded) and returns when every one is empty; else throws, on every
// member, a kiln::Error naming `what`, the group, and the failed members'
// world ranks with their problems. A member that never arrives makes the
// exchange time out, which names it.
void agree_on(ProcessGroup& group, const std::string& what, const std::string& problem);

// What `step` raised, as agree_on's problem ("" when it returned).
std::string problem_of(const std::function<void()>& step);

// Runs `step` on the calling thread where `here`, then agrees on how it went
// (agree_on): an error on any member is raised on every member at once. A
// group of one raises the step's own error.
void run_and_agree(ProcessGroup& group, const std::string& what, bool here,
                   const std::function<void()>& step);

// Runs `step` on a thread of its own, waits for it up to the group's
// timeout, then agrees on its outcome (an exception it throws, or its not
// returning in time), the exchange waiting up to twice the timeout (a
// member whose step returned at once waits there for the others'). `undo`
// frees what a successful step made, where another member's step failed:
// here, or, for a step that was not waited for and succeeds after all, on
// its thread. A step still running cannot be stopped: its thread is left
// to it, so `step` and `undo` must own what they use. An error of undo's
// own is dropped for the one being raised.
void joint_setup(ProcessGroup& group, const std::string& what, std::function<void()> step,
                 std::function<void()> undo = {});

}  // namespace kiln::dist
