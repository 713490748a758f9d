#include "engine/tokenizer/printable_text.h"

#include <cstdio>

namespace kvscope::tokenizer {
namespace {

// Length of the well-formed UTF-8 sequence at `text[at]` (Unicode's table
// 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), 0 when
// it is not one.
std::size_t utf8_length(std::string_view text, std::size_t at) {
    const auto byte = [&](std::size_t i) {
        return static_cast<unsigned char>(text[i]);
    };
    const unsigned char lead = byte(at);
    std::size_t length = 0;
    unsigned char second_low = 0x80; // the second byte's range depends on the lead
    unsigned char second_high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        second_low = lead == 0xE0 ? 0xA0 : 0x80;  // overlong below U+0800
        second_high = lead == 0xED ? 0x9F : 0xBF; // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        second_low = lead == 0xF0 ? 0x90 : 0x80;  // overlong below U+10000
        second_high = lead == 0xF4 ? 0x8F : 0xBF; // past U+10FFFF
    } else {
        return 0;
    }
    if (at + length > text.size() || byte(at + 1) < second_low || byte(at + 1) > second_high) {
        return 0;
    }
    for (std::size_t i = 2; i < length; ++i) {
        if ((byte(at + i) & 0xC0) != 0x80) {
            return 0;
        }
    }
    return length;
}

// C1 controls (U+0080..U+009F): two bytes, C2 80..9F, that a terminal may
// act on as it does on ESC.
bool is_c1_control(std::string_view text, std::size_t at) {
    return static_cast<unsigned char>(text[at]) == 0xC2 &&
           static_cast<unsigned char>(text[at + 1]) <= 0x9F;
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
        } else if (c == '\\') {
            out += "\\\\"; // so a literal backslash-n is not a newline's escape
        } else if (c >= 0x20 && c < 0x7F) {
            out += static_cast<char>(c);
        } else if (length > 0 && !is_c1_control(bytes, at)) {
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
