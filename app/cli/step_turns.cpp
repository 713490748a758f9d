#include "app/cli/step_turns.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace kvscope::cli {
namespace {

// One byte each way: a turn, or the end of the run. MSG_NOSIGNAL: a peer
// that is gone is an error to read, not a SIGPIPE that ends the process.
constexpr char kTurn = 't';
constexpr char kEnd = 'e';

bool send_byte(int socket, char byte = kTurn) {
    for (;;) {
        const ssize_t n = send(socket, &byte, 1, MSG_NOSIGNAL);
        if (n == 1) {
            return true;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return false;
    }
}

// The byte received; 0 when the peer closed its end or the socket failed.
char receive_byte(int socket) {
    char byte = 0;
    for (;;) {
        const ssize_t n = recv(socket, &byte, 1, 0);
        if (n == 1) {
            return byte;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return 0;
    }
}

} // namespace

StepTurns::StepTurns(const std::string& descriptor) {
    int fd = -1;
    const auto [end, error] =
        std::from_chars(descriptor.data(), descriptor.data() + descriptor.size(), fd);
    int type = 0;
    socklen_t length = sizeof type;
    if (error != std::errc() || end != descriptor.data() + descriptor.size() || fd < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0) {
        throw std::invalid_argument("--step-turns " + descriptor +
                                    ": not an open socket (the option is kvscope gate's)");
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC); // nothing this record starts shares it
    socket_ = fd;
}

StepTurns::~StepTurns() {
    if (socket_ >= 0) {
        close(socket_);
    }
}

void StepTurns::before_step() {
    if (!let_go_ && socket_ >= 0 && receive_byte(socket_) != kTurn) {
        let_go_ = true;
    }
}

void StepTurns::after_step() {
    if (!let_go_ && socket_ >= 0 && !send_byte(socket_)) {
        let_go_ = true;
    }
}

void StepTurns::finish(bool completed) {
    if (socket_ < 0) {
        return;
    }
    if (completed && !let_go_) {
        send_byte(socket_, kEnd); // a gate already gone cannot hear it: nothing to do
    }
    close(socket_);
    socket_ = -1;
}

TurnGiver::TurnGiver() {
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
        throw std::runtime_error(std::string("cannot make a socket for turns: ") +
                                 std::strerror(errno));
    }
    gate_ = ends[0];
    // Above the descriptors a record is started with, so that placing it at
    // kChildTurns never means duplicating a descriptor onto itself.
    child_ = fcntl(ends[1], F_DUPFD_CLOEXEC, 16);
    close(ends[1]);
    if (child_ < 0) {
        close(gate_);
        throw std::runtime_error(std::string("cannot make a socket for turns: ") +
                                 std::strerror(errno));
    }
}

TurnGiver::~TurnGiver() {
    release();
    close_child_end();
}

void TurnGiver::close_child_end() {
    if (child_ >= 0) {
        close(child_);
        child_ = -1;
    }
}

Turn TurnGiver::step() {
    if (gate_ < 0) {
        return Turn::ended;
    }
    // A record whose run is over may have said so and closed its end before
    // this turn was offered: the send then fails, but what it said is still
    // there to read.
    send_byte(gate_);
    const char answer = receive_byte(gate_);
    if (answer == kTurn) {
        return Turn::taken;
    }
    release();
    return answer == kEnd ? Turn::ended : Turn::gone;
}

void TurnGiver::release() {
    if (gate_ >= 0) {
        close(gate_);
        gate_ = -1;
    }
}

} // namespace kvscope::cli
