#include "profiler/attach/token_text.h"

#include <cstdio>

namespace kvscope::attach {
namespace {

// Length of the valid UTF-8 sequence at `text[at]`, 0 when it is not one.
std::size_t utf8_length(const std::string& text, std::size_t at) {
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

std::string tokens_text(const tokenizer::Tokenizer& tokenizer,
                        std::span<const std::int64_t> token_ids, std::size_t max_chars) {
    std::string raw;
    for (const std::int64_t id : token_ids) {
        if (id >= 0 && static_cast<std::size_t>(id) < tokenizer.vocab_size()) {
            raw += tokenizer.token_bytes(static_cast<tokenizer::TokenId>(id), true);
        } else {
            raw += "[" + std::to_string(id) + "]";
        }
    }
    std::string out;
    std::size_t at = 0;
    for (std::size_t chars = 0; at < raw.size() && chars < max_chars; ++chars) {
        const auto c = static_cast<unsigned char>(raw[at]);
        const std::size_t length = c >= 0x80 ? utf8_length(raw, at) : 0;
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c >= 0x20 && c < 0x7F) {
            out += static_cast<char>(c);
        } else if (length > 0) {
            out.append(raw, at, length);
            at += length;
            continue;
        } else {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
            out += escaped;
        }
        ++at;
    }
    if (at < raw.size()) {
        out += "...";
    }
    return out;
}

std::string token_ids_text(std::span<const std::int64_t> token_ids, std::size_t max_ids) {
    std::string out = "[";
    for (std::size_t i = 0; i < token_ids.size() && i < max_ids; ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(token_ids[i]);
    }
    if (token_ids.size() > max_ids) {
        out += ", ...";
    }
    return out + "]";
}

} // namespace kvscope::attach
