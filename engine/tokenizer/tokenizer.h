// Byte-level BPE tokenizer built from a GGUF file's tokenizer.ggml.* metadata
// (GPT-2 family: SmolLM2, StarCoder, Llama 3, ...): vocabulary, merges, token
// types and the pre-tokenizer the file names.
#pragma once

#include "engine/tokenizer/pretokenizer.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvscope::gguf {
class GgufFile;
}

namespace kvscope::tokenizer {

using TokenId = std::int32_t;

// tokenizer.ggml.token_type values.
enum class TokenType : std::int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

class Tokenizer {
public:
    // Throws gguf::GgufError (naming the file) when the metadata is missing,
    // inconsistent or of a tokenizer model kvscope does not implement.
    static Tokenizer from_gguf(const gguf::GgufFile& file);

    // Token ids for `text`. With `parse_special`, the text of control and
    // user-defined tokens (e.g. "<|im_start|>") becomes those tokens;
    // without, it is tokenized as plain text.
    std::vector<TokenId> encode(std::string_view text, bool parse_special) const;

    // The raw bytes a token stands for (may be part of a UTF-8 character).
    // Control tokens give their text only when `render_special` is set.
    std::string token_bytes(TokenId id, bool render_special = false) const;
    // All tokens' bytes concatenated (see Utf8StreamDecoder for streaming).
    std::string decode(const std::vector<TokenId>& ids, bool render_special = false) const;

    std::size_t vocab_size() const { return tokens_.size(); }
    const std::string& token_text(TokenId id) const {
        return tokens_.at(static_cast<std::size_t>(id));
    }
    TokenType token_type(TokenId id) const { return types_.at(static_cast<std::size_t>(id)); }
    bool is_special(TokenId id) const;
    // -1 when the file does not name one.
    TokenId bos_id() const { return bos_id_; }
    TokenId eos_id() const { return eos_id_; }
    // What a byte the vocabulary has no token for becomes (-1: it is dropped).
    TokenId unknown_id() const { return unknown_id_; }
    // Whether generation should stop at `id`: the end-of-sequence token or an
    // end-of-turn control token ("<|im_end|>", "<|eot_id|>", ...).
    bool ends_generation(TokenId id) const;
    // Looks a token up by its exact text; -1 when absent.
    TokenId find(std::string_view text) const;

private:
    Tokenizer(std::string_view pre_name)
        : pre_(pre_name) {}
    void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
    void encode_plain(std::string_view text, std::vector<TokenId>& out) const;

    struct Merge {
        std::int32_t rank;
        TokenId merged;
    };
    static std::uint64_t pair_key(TokenId left, TokenId right) {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
               static_cast<std::uint32_t>(right);
    }

    PreTokenizer pre_;
    std::vector<std::string> tokens_; // byte-level symbols, as stored in the file
    std::vector<TokenType> types_;
    std::unordered_map<std::string, TokenId> token_ids_;
    std::unordered_map<std::uint64_t, Merge> merges_;
    std::array<TokenId, 256> byte_tokens_{};                // token of each single byte
    std::vector<std::pair<std::string, TokenId>> specials_; // longest text first
    TokenId bos_id_ = -1;
    TokenId eos_id_ = -1;
    TokenId unknown_id_ = -1;
};

} // namespace kvscope::tokenizer
