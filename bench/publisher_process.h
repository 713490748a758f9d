// The attach benchmarks' publishers run in a child process: a bench binary
// started with its own arguments (kvscope-bench-attach --publish ...), which
// prints one endpoint per line, publishes, prints "done ..." and exits once
// its stdin is closed. Its CPU is then not the subscriber's, and the
// subscriber's RSS is its own.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <unistd.h>
#include <vector>

namespace kvscope::bench {

struct PublisherProcess {
    pid_t pid = -1;
    FILE* out = nullptr; // its stdout
    int in = -1;         // its stdin: closed, it closes its sockets and exits
};

// Starts `exe` with `args` (args[0] its name) and pipes to and from it.
inline PublisherProcess start_publisher_process(const std::string& exe,
                                                std::vector<std::string> args) {
    int from_child[2];
    int to_child[2];
    if (pipe(from_child) != 0) {
        throw std::runtime_error("pipe failed");
    }
    if (pipe(to_child) != 0) {
        close(from_child[0]);
        close(from_child[1]);
        throw std::runtime_error("pipe failed");
    }
    const pid_t pid = fork();
    if (pid < 0) {
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        dup2(from_child[1], STDOUT_FILENO);
        dup2(to_child[0], STDIN_FILENO);
        close(from_child[0]);
        close(from_child[1]);
        close(to_child[0]);
        close(to_child[1]);
        std::vector<char*> argv;
        for (std::string& a : args) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        execv(exe.c_str(), argv.data());
        std::perror("execv");
        _exit(127);
    }
    close(from_child[1]);
    close(to_child[0]);
    return PublisherProcess{pid, fdopen(from_child[0], "r"), to_child[1]};
}

// One line of the child's output, without its newline ("" at the end).
inline std::string read_line(FILE* f) {
    std::string line;
    for (int c = std::fgetc(f); c != EOF && c != '\n'; c = std::fgetc(f)) {
        line.push_back(static_cast<char>(c));
    }
    return line;
}

} // namespace kvscope::bench
