// Lines of a text file from elsewhere (a trace), read with a bound on their
// length: a line of a gigabyte is refused, the bound named, rather than
// read into memory whole. std::getline has no bound.
#pragma once

#include <cstddef>
#include <istream>
#include <string>

namespace kvscope {

// Longer than any trace line kvscope has met by far (a Mooncake request's
// hash ids for a million tokens take about 20 KB, a kvscope prompt of a
// whole book a few MB).
inline constexpr std::size_t kMaxTraceLineBytes = std::size_t{16} << 20;

enum class LineRead {
    line,     // `line` holds the next line, without its '\n'
    end,      // no more lines
    too_long, // the line runs past the bound; `line` holds its start
};

LineRead read_line(std::istream& in, std::string& line, std::size_t max_bytes = kMaxTraceLineBytes);

// What a trace reader says after FILE:LINE: of a line read_line() found
// too_long.
std::string too_long_trace_line();

} // namespace kvscope
