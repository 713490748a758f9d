#include "app/cli/progress_line.h"

#include <cstdio>
#include <unistd.h>

namespace kvscope::cli {

ProgressLine::ProgressLine(bool quiet)
    : quiet_(quiet)
    , terminal_(isatty(fileno(stderr)) == 1) {}

void ProgressLine::update(const std::string& text) {
    if (quiet_) {
        return;
    }
    if (terminal_) {
        // Spaces after it clear what a longer earlier line left.
        std::fprintf(stderr, "\r%s   ", text.c_str());
        open_ = true;
    } else {
        std::fprintf(stderr, "%s\n", text.c_str());
    }
    std::fflush(stderr);
}

void ProgressLine::finish() {
    if (open_) {
        std::fputs("\n", stderr);
        open_ = false;
    }
}

} // namespace kvscope::cli
