#include "engine/util/text_lines.h"

#include <string>

namespace kvscope {

LineRead read_line(std::istream& in, std::string& line, std::size_t max_bytes) {
    line.clear();
    std::streambuf* buffer = in.rdbuf();
    if (buffer == nullptr || !in.good()) {
        return LineRead::end;
    }
    bool any = false;
    for (;;) {
        const auto c = buffer->sbumpc();
        if (c == std::char_traits<char>::eof()) {
            in.setstate(std::ios::eofbit);
            return any ? LineRead::line : LineRead::end;
        }
        any = true;
        if (c == '\n') {
            return LineRead::line;
        }
        if (line.size() == max_bytes) {
            return LineRead::too_long;
        }
        line.push_back(static_cast<char>(c));
    }
}

std::string too_long_trace_line() {
    return "longer than " + std::to_string(kMaxTraceLineBytes >> 20) +
           " MiB, which no trace line needs: not a trace kvscope reads";
}

} // namespace kvscope
