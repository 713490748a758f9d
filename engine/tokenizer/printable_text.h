// Generated or received token text made safe for one line of a terminal or
// a table cell: a model's output is any bytes (newlines, control characters,
// half a UTF-8 character where a token limit cut it), and printing them raw
// would break the layout or the terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvscope::tokenizer {

// At most `max_chars` characters of `bytes` (an ellipsis "..." marks a cut);
// newlines and tabs as \n and \t, a backslash as \\, other control
// characters (C0 and C1) and bytes that are not well-formed UTF-8 as \xNN,
// so the text is always printable and one line.
std::string printable_text(std::string_view bytes, std::size_t max_chars);

} // namespace kvscope::tokenizer
