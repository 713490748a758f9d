#include "engine/tokenizer/utf8_stream.h"

#include <cstdint>

namespace kvscope::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD"; // U+FFFD

// Length of the sequence a lead byte starts; 0 for a byte that cannot lead.
int sequence_length(std::uint8_t lead) {
    if (lead < 0x80) {
        return 1;
    }
    if (lead >= 0xc2 && lead <= 0xdf) {
        return 2;
    }
    if (lead >= 0xe0 && lead <= 0xef) {
        return 3;
    }
    if (lead >= 0xf0 && lead <= 0xf4) {
        return 4;
    }
    return 0;
}

// Whether `byte` may follow `lead` as the first continuation byte (rules out
// overlong forms, surrogates and code points above U+10FFFF).
bool valid_second(std::uint8_t lead, std::uint8_t byte) {
    if ((byte & 0xc0) != 0x80) {
        return false;
    }
    switch (lead) {
    case 0xe0:
        return byte >= 0xa0;
    case 0xed:
        return byte <= 0x9f;
    case 0xf0:
        return byte >= 0x90;
    case 0xf4:
        return byte <= 0x8f;
    default:
        return true;
    }
}

} // namespace

std::string Utf8StreamDecoder::push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    std::size_t i = 0;
    while (i < pending_.size()) {
        const auto lead = static_cast<std::uint8_t>(pending_[i]);
        const int length = sequence_length(lead);
        if (length == 0) {
            out += kReplacement;
            ++i;
            continue;
        }
        int have = 1;
        bool broken = false;
        while (have < length && i + static_cast<std::size_t>(have) < pending_.size()) {
            const auto byte =
                static_cast<std::uint8_t>(pending_[i + static_cast<std::size_t>(have)]);
            const bool ok = have == 1 ? valid_second(lead, byte) : (byte & 0xc0) == 0x80;
            if (!ok) {
                broken = true;
                break;
            }
            ++have;
        }
        if (broken) {
            out += kReplacement; // the bytes so far can never complete
            i += static_cast<std::size_t>(have);
            continue;
        }
        if (have < length) {
            break; // incomplete: wait for the next token
        }
        out.append(pending_, i, static_cast<std::size_t>(length));
        i += static_cast<std::size_t>(length);
    }
    pending_.erase(0, i);
    return out;
}

std::string Utf8StreamDecoder::finish() {
    std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
    pending_.clear();
    return out;
}

} // namespace kvscope::tokenizer
