// Arbitrary bytes through the real model's tokenizer (SmolLM2's, or the GGUF
// $KVSCOPE_MODEL names): encoding never fails, decoding gives the bytes back
// with special tokens parsed or not (byte-level BPE spells every byte its
// vocabulary has a token for, valid UTF-8 or not; the rest, in SmolLM2's
// the bytes UTF-8 never uses and a few control characters, become its
// unknown token); the streaming UTF-8 decoder, fed token by token, gives
// valid UTF-8 always, and what decoding at once gives when that is valid.
#include "engine/gguf/gguf_file.h"
#include "engine/session/model_loading.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8_stream.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace kvscope;

namespace {

const tokenizer::Tokenizer& model_tokenizer() {
    static const tokenizer::Tokenizer tokens = [] {
        try {
            const gguf::GgufFile file = gguf::GgufFile::open(session::model_file(""));
            return tokenizer::Tokenizer::from_gguf(file);
        } catch (const std::exception& error) {
            std::fprintf(stderr, "fuzz_tokenizer needs the model (scripts/setup.sh): %s\n",
                         error.what());
            std::exit(77); // skipped (run_fuzzer.sh, tests/fuzz/CMakeLists.txt)
        }
    }();
    return tokens;
}

// RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF.
bool valid_utf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t length = 0;
        std::uint32_t code = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            length = 2;
            code = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            length = 3;
            code = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            length = 4;
            code = c & 0x07;
        } else {
            return false;
        }
        if (i + length > text.size()) {
            return false;
        }
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) {
                return false;
            }
            code = (code << 6) | (next & 0x3F);
        }
        const std::uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
        if (code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
            return false;
        }
        i += length;
    }
    return true;
}

std::string escaped(std::string_view text) {
    std::string out;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte < 0x7F && byte != '\\') {
            out += c;
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", byte);
            out += hex;
        }
    }
    return out;
}

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_tokenizer: %s\n", what);
        std::abort();
    }
}

// Aborts, showing both texts, when `got` is not `want`.
void check_same(const std::string& got, const std::string& want, const char* what) {
    if (got != want) {
        std::fprintf(stderr, "fuzz_tokenizer: %s\n  in:  \"%s\"\n  out: \"%s\"\n", what,
                     escaped(want).c_str(), escaped(got).c_str());
        std::abort();
    }
}

// The text as the vocabulary spells it: a byte without a byte token becomes
// the unknown token (rendered as `render_special` says), or goes without one.
std::string spellable(const tokenizer::Tokenizer& tokens, std::string_view text,
                      bool render_special) {
    static const std::array<bool, 256> has_token = [&tokens] {
        std::array<bool, 256> has{};
        for (int b = 0; b < 256; ++b) {
            const std::string byte(1, static_cast<char>(b));
            has[static_cast<std::size_t>(b)] = tokens.find(tokenizer::bytes_to_symbols(byte)) >= 0;
        }
        return has;
    }();
    const std::string unknown =
        tokens.unknown_id() >= 0 ? tokens.token_bytes(tokens.unknown_id(), render_special) : "";
    std::string out;
    for (const char c : text) {
        out += has_token[static_cast<unsigned char>(c)] ? std::string(1, c) : unknown;
    }
    return out;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)model_tokenizer();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const tokenizer::Tokenizer& tokens = model_tokenizer();
    const std::string text(reinterpret_cast<const char*>(data), size);

    const auto plain = tokens.encode(text, false);
    check_same(tokens.decode(plain), spellable(tokens, text, false),
               "plain text does not survive encode and decode");
    const auto special = tokens.encode(text, true);
    check_same(tokens.decode(special, true), spellable(tokens, text, true),
               "text with special tokens does not survive encode and decode");

    tokenizer::Utf8StreamDecoder stream;
    std::string streamed;
    for (const tokenizer::TokenId id : plain) {
        streamed += stream.push(tokens.token_bytes(id));
    }
    streamed += stream.finish();
    check(valid_utf8(streamed), "the stream decoder gave invalid UTF-8");
    if (const std::string whole = tokens.decode(plain); valid_utf8(whole)) {
        check_same(streamed, whole, "streaming changed what decoding at once gives");
    }

    const std::string chat = tokenizer::render_chatml({{"user", text}}, true);
    (void)tokens.encode(chat, true);
    return 0;
}
