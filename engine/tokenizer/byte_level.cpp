#include "engine/tokenizer/byte_level.h"

namespace kvscope::tokenizer {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes are
// assigned code points 256, 257, ... in byte order.
struct Tables {
    std::array<char32_t, 256> byte_to_symbol{};
    std::array<std::int16_t, 324> symbol_to_byte{}; // symbols are all below 324

    Tables() {
        symbol_to_byte.fill(-1);
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
            const char32_t symbol = printable ? static_cast<char32_t>(b) : next++;
            byte_to_symbol[static_cast<std::size_t>(b)] = symbol;
            symbol_to_byte[symbol] = static_cast<std::int16_t>(b);
        }
    }
};

const Tables& tables() {
    static const Tables instance;
    return instance;
}

// Decodes one UTF-8 code point at `text[i]`, advancing `i`. Malformed input
// yields the single byte as a code point (never reads past the end).
char32_t next_code_point(std::string_view text, std::size_t& i) {
    const auto lead = static_cast<std::uint8_t>(text[i]);
    int length = lead < 0x80           ? 1
                 : (lead >> 5) == 0x6  ? 2
                 : (lead >> 4) == 0xe  ? 3
                 : (lead >> 3) == 0x1e ? 4
                                       : 0;
    if (length == 0 || i + static_cast<std::size_t>(length) > text.size()) {
        ++i;
        return lead;
    }
    char32_t cp = length == 1 ? lead : lead & (0x7f >> length);
    for (int k = 1; k < length; ++k) {
        const auto cont = static_cast<std::uint8_t>(text[i + static_cast<std::size_t>(k)]);
        if ((cont & 0xc0) != 0x80) {
            ++i;
            return lead;
        }
        cp = (cp << 6) | (cont & 0x3f);
    }
    i += static_cast<std::size_t>(length);
    return cp;
}

} // namespace

char32_t byte_to_symbol(std::uint8_t byte) {
    return tables().byte_to_symbol[byte];
}

std::optional<std::uint8_t> symbol_to_byte(char32_t symbol) {
    if (symbol >= tables().symbol_to_byte.size() || tables().symbol_to_byte[symbol] < 0) {
        return std::nullopt;
    }
    return static_cast<std::uint8_t>(tables().symbol_to_byte[symbol]);
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

std::string bytes_to_symbols(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        append_utf8(out, byte_to_symbol(static_cast<std::uint8_t>(c)));
    }
    return out;
}

std::string symbols_to_bytes(std::string_view symbols) {
    std::string out;
    out.reserve(symbols.size());
    std::size_t i = 0;
    while (i < symbols.size()) {
        const char32_t cp = next_code_point(symbols, i);
        if (const auto byte = symbol_to_byte(cp)) {
            out += static_cast<char>(*byte);
        } else {
            append_utf8(out, cp);
        }
    }
    return out;
}

} // namespace kvscope::tokenizer
