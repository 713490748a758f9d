// Progress of a long command on stderr, as its reader wants it: on a
// terminal one line rewritten in place; anywhere else (a log file, a pipe)
// one line per update, each ended, so `kvscope attach --duration 240 2>log`
// leaves 240 lines rather than one; with --quiet nothing.
#pragma once

#include <string>

namespace kvscope::cli {

class ProgressLine {
public:
    explicit ProgressLine(bool quiet = false);
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;
    ~ProgressLine() { finish(); }

    void update(const std::string& text);
    // Ends the line in place on a terminal, so what follows starts afresh.
    void finish();

private:
    bool quiet_ = false;
    bool terminal_ = false;
    bool open_ = false; // a line in place waits to be ended
};

// The help of --quiet, which every command with progress lines takes.
inline constexpr const char* kQuietHelp =
    "Print no progress lines on stderr (results, warnings and errors still)";

} // namespace kvscope::cli
