#include "engine/tokenizer/printable_text.h"

#include <cstdio>

namespace kvscope::tokenizer {
namespace {

// Length of the valid UTF-8 sequence at `text[at]`, 0 when it is not one.
std::size_t utf8_length(std::string_view text, std::size_t at) {
    const auto byte = [&](std::size_t i) {
        return static_cast<unsigned char>(text[i]);
    };
    const unsigned char lead = byte(at);
    std::size_t length = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
    } else {
        return 0;
    }
    if (at + length > text.size()) {
        return 0;
    }
    for (std::size_t i = 1; i < length; ++i) {
        if ((byte(at + i) & 0xC0) != 0x80) {
            return 0;
        }
    }
    return length;
}

} // namespace

std::string printable_text(std::string_view bytes, std::size_t max_chars) {
    std::string out;
    std::size_t at = 0;
    for (std::size_t chars = 0; at < bytes.size() && chars < max_chars; ++chars) {
        const auto c = static_cast<unsigned char>(bytes[at]);
        const std::size_t length = c >= 0x80 ? utf8_length(bytes, at) : 0;
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c >= 0x20 && c < 0x7F) {
            out += static_cast<char>(c);
        } else if (length > 0) {
            out.append(bytes, at, length);
            at += length;
            continue;
        } else {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
            out += escaped;
        }
        ++at;
    }
    if (at < bytes.size()) {
        out += "...";
    }
    return out;
}

} // namespace kvscope::tokenizer
