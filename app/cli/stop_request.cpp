#include "app/cli/stop_request.h"

#include <cerrno>
#include <initializer_list>

namespace kvscope::cli {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_child = 0; // pid_t fits a sig_atomic_t on Linux
volatile std::sig_atomic_t g_other_child = 0;

void on_stop(int signal) {
    const int saved = errno; // the interrupted code may be reading errno
    g_signal = signal;
    if (g_child > 0) {
        kill(static_cast<pid_t>(g_child), SIGINT);
    }
    if (g_other_child > 0) {
        kill(static_cast<pid_t>(g_other_child), SIGINT);
    }
    errno = saved;
}

} // namespace

StopRequest::StopRequest() {
    g_signal = 0;
    g_child = 0;
    g_other_child = 0;
    struct sigaction action {};
    action.sa_handler = on_stop;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART; // other system calls carry on; loops poll signal()
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
}

StopRequest::~StopRequest() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_child = 0;
    g_other_child = 0;
}

int StopRequest::signal() {
    return g_signal;
}

void StopRequest::forward_to(pid_t child, pid_t other_child) {
    g_child = child;
    g_other_child = other_child;
    if (g_signal != 0) { // asked to stop while the children were being started
        for (const pid_t c : {child, other_child}) {
            if (c > 0) {
                kill(c, SIGINT);
            }
        }
    }
}

void StopRequest::forget(pid_t child) {
    if (g_child == child) {
        g_child = 0;
    }
    if (g_other_child == child) {
        g_other_child = 0;
    }
}

} // namespace kvscope::cli
