// What happens around each step of a recorded run besides serving
// (profiler/recorded_run.h): kvscope gate's turns, where a record waits for
// its turn and hands it back. Its own header, so the gate's side need not
// see the run's recording and session.
#pragma once

#include <string>

namespace kvscope::profiler {

// kvscope gate's turns implement it (app/cli/step_turns.h).
class StepHook {
public:
    virtual ~StepHook() = default;
    virtual void before_step() = 0;
    virtual void after_step() = 0;
    // The other side let go: the run stops (its steps can no longer be paired).
    virtual bool let_go() const = 0;
    // The run is over, before its recording is saved; `completed`: it
    // served every step.
    virtual void finish(bool completed) = 0;
    // Written into the recording's metadata ("steps_in_turns": compare
    // pairs such steps); empty: nothing.
    virtual std::string metadata_key() const { return {}; }
};

} // namespace kvscope::profiler
