// The value of one hexadecimal digit, for the readers of hex text (byte
// pieces "<0xXX>" in SentencePiece vocabularies, raw block hashes in
// attached engines' events).
#pragma once

namespace kvscope {

// 0..15, or -1 when `c` is not a hex digit (either case).
inline int hex_digit(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

} // namespace kvscope
