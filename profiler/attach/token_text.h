// The text of token ids an attached engine sent, through a tokenizer the
// user named (--tokenizer FILE.gguf). The engine's vocabulary may not be the
// tokenizer's: an id outside it shows as "[id]" rather than failing, and
// bytes that are not UTF-8 are shown escaped, so the text is always printable.
#pragma once

#include "engine/tokenizer/tokenizer.h"

#include <cstdint>
#include <span>
#include <string>

namespace kvscope::attach {

// At most `max_chars` characters (an ellipsis marks a cut); control
// characters shown as escapes (\n, \t, \xNN).
std::string tokens_text(const tokenizer::Tokenizer& tokenizer,
                        std::span<const std::int64_t> token_ids, std::size_t max_chars = 80);

// The ids themselves, "[1, 2, 3, ...]", for when no tokenizer was given.
std::string token_ids_text(std::span<const std::int64_t> token_ids, std::size_t max_ids = 12);

} // namespace kvscope::attach
