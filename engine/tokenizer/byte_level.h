// GPT-2 style byte-level encoding: every byte is shown as a printable Unicode
// character so BPE vocabularies can store arbitrary bytes as text. Byte-level
// BPE token strings are written in this alphabet ("Ġ" is the space byte).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvscope::tokenizer {

// The code point that stands for `byte`.
char32_t byte_to_symbol(std::uint8_t byte);

// The byte a code point stands for, if it is one of the 256 symbols.
std::optional<std::uint8_t> symbol_to_byte(char32_t symbol);

// Appends the UTF-8 encoding of `code_point` to `out`.
void append_utf8(std::string& out, char32_t code_point);

// Raw bytes -> their byte-level symbols, UTF-8 encoded.
std::string bytes_to_symbols(std::string_view bytes);

// Byte-level symbols (UTF-8) -> the raw bytes they stand for. Characters that
// are not byte symbols are copied through as UTF-8.
std::string symbols_to_bytes(std::string_view symbols);

} // namespace kvscope::tokenizer
