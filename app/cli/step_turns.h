// Two records in step: kvscope gate runs the base and the new build at once
// and hands them turns, one engine step each, so that both builds' step i run
// within moments of each other. A machine that slows in spells (a busy
// neighbour, a host that changes pace) then slows both alike, and the ratio
// of their CPU times keeps what the builds differ by. The gate and each record
// share a socket: the gate sends a byte to hand the record a step, the record
// sends one back when the step is over, and another when its run is over. A
// record whose socket closes without that last word failed or was killed, and
// the gate stops the round rather than let the other build run on unpaired.
#pragma once

#include "profiler/step_hook.h"

#include <string>
#include <sys/types.h>

namespace kvscope::cli {

// The record's side (`kvscope record --step-turns 3`): the recorded run's
// step hook (profiler/recorded_run.h).
class StepTurns final : public profiler::StepHook {
public:
    // The descriptor the gate passed. Throws std::invalid_argument when it is
    // not an open socket.
    explicit StepTurns(const std::string& descriptor);
    ~StepTurns() override;
    StepTurns(const StepTurns&) = delete;
    StepTurns& operator=(const StepTurns&) = delete;

    // Blocks until the gate hands over the next step. Once the gate has let
    // go, every wait returns at once.
    void before_step() override;
    // The step is over: the turn goes back to the gate.
    void after_step() override;
    // The run is over: says so when it served every step (`completed`; a
    // gate sees a record that ends without saying as failed) and lets go of
    // the socket, so the gate need not wait for the recording to be saved.
    void finish(bool completed) override;
    // The gate let go while the run had steps to take: it is stopping, or
    // it is gone. Either way the run stops (the gate can no longer pair it).
    bool let_go() const override { return let_go_; }
    // Compare pairs steps taken in turns.
    std::string metadata_key() const override { return "steps_in_turns"; }

private:
    int socket_ = -1;
    bool let_go_ = false;
};

// What became of a step the gate handed over.
enum class Turn {
    taken, // the record took the step and handed the turn back
    ended, // the record had no step left: its run is over (or was let go)
    gone,  // the record went away without saying its run was over: it failed
};

// The gate's side of one record started with turns.
class TurnGiver {
public:
    // A socket pair: the gate's end (close-on-exec) stays here, the record's
    // end is child_end(), to place at kChildTurns in the record. Throws
    // std::runtime_error.
    TurnGiver();
    ~TurnGiver();
    TurnGiver(const TurnGiver&) = delete;
    TurnGiver& operator=(const TurnGiver&) = delete;

    int child_end() const { return child_; }
    // Once the record has been started: the gate needs its end no more.
    void close_child_end();
    // One step: hands the record its turn and waits until it is over. Once a
    // record has ended or gone it takes no more turns (ended).
    Turn step();
    bool stepping() const { return gate_ >= 0; }
    // Lets go of the record, which stops at its next step (and would run no
    // further in step anyway).
    void release();

private:
    int gate_ = -1;
    int child_ = -1;
};

inline constexpr int kChildTurns = 3; // where a record finds its end
inline constexpr const char* kChildTurnsOption = "3";

} // namespace kvscope::cli
