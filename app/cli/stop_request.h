// Ctrl-C (SIGINT) and a job's stop (SIGTERM, what CI sends at a timeout) ask
// a long command to stop where it can and keep what it did, a recording
// closed and marked interrupted, rather than die mid-write. One guard for
// every command: while it lives either signal sets the request; the handlers
// that were there before come back when it ends.
#pragma once

#include <csignal>
#include <sys/types.h>

namespace kvscope::cli {

class StopRequest {
public:
    StopRequest();
    ~StopRequest();
    StopRequest(const StopRequest&) = delete;
    StopRequest& operator=(const StopRequest&) = delete;

    // The signal that asked to stop since the guard began; 0 when none did.
    static int signal();
    static bool requested() { return signal() != 0; }
    // Children doing the work (kvscope gate's records) are asked too: they
    // get SIGINT, their own request to stop and save. 0: no child.
    static void forward_to(pid_t child, pid_t other_child = 0);
    // Stops forwarding to `child` without a signal, once it has ended and
    // before it is reaped (a reaped pid may soon be another process's).
    static void forget(pid_t child);

private:
    struct sigaction old_int_ {};
    struct sigaction old_term_ {};
};

} // namespace kvscope::cli
