// Two records in step: kvscope gate runs the base and the new build at once
// and hands them turns, one engine step each, so that both builds' step i run
// within moments of each other. A machine that slows in spells (a busy
// neighbour, a host that changes pace) then slows both alike, and the ratio
// of their CPU times keeps what the builds differ by. The gate and each record
// share a socket: the gate sends a byte to hand the record a step, the record
// sends one back when the step is over.
#pragma once

#include <string>
#include <sys/types.h>

namespace kvscope::cli {

// The record's side (`kvscope record --step-turns 3`).
class StepTurns {
public:
    // The descriptor the gate passed. Throws std::invalid_argument when it is
    // not an open socket.
    explicit StepTurns(const std::string& descriptor);
    ~StepTurns();
    StepTurns(const StepTurns&) = delete;
    StepTurns& operator=(const StepTurns&) = delete;

    // Blocks until the gate hands over the next step. Once the gate has let
    // go, every wait returns at once.
    void wait();
    // The step is over: the turn goes back to the gate.
    void done();
    // The gate let go while the run had steps to take: it is stopping, or
    // it is gone. Either way the run stops (the gate can no longer pair it).
    bool let_go() const { return let_go_; }

private:
    int socket_ = -1;
    bool let_go_ = false;
};

// The gate's side of one record started with turns.
class TurnTaker {
public:
    // A socket pair: the gate's end (close-on-exec) stays here, the record's
    // end is child_end(), to place at kChildTurns in the record. Throws
    // std::runtime_error.
    TurnTaker();
    ~TurnTaker();
    TurnTaker(const TurnTaker&) = delete;
    TurnTaker& operator=(const TurnTaker&) = delete;

    int child_end() const { return child_; }
    // Once the record has been started: the gate needs its end no more.
    void close_child_end();
    // One step: hands the record its turn and waits until it is over. False
    // when the record takes no more turns (it ended, or is ending).
    bool step();
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
