// The tokenizer a GGUF file's tokenizer.ggml.* metadata describes: byte-level
// BPE (model "gpt2": SmolLM2, StarCoder, Llama 3, Qwen; vocabulary, merges,
// token types and the pre-tokenizer the file names) or SentencePiece (model
// "llama": Gemma, Llama 2; pieces merged by score, byte fallback, the
// leading-space rule; sentencepiece.h). Special tokens are cut out of the text
// first, the same way for both.
#pragma once

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/sentencepiece.h"

#include <array>
#include <cstdint>
#include <optional>
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

    // Token ids for `text`. The text of user-defined tokens (Gemma's runs of
    // newlines) always becomes those tokens; with `parse_special`, so does
    // that of control tokens (e.g. "<|im_start|>"); without, it is tokenized
    // as plain text.
    std::vector<TokenId> encode(std::string_view text, bool parse_special) const;
    // Token ids for a text the model reads from the start of a sequence (a
    // prompt, an evaluation text): encode() after the beginning-of-sequence
    // token where the model wants one (adds_bos()).
    std::vector<TokenId> encode_sequence(std::string_view text, bool parse_special) const;
    // tokenizer.ggml.add_bos_token, or llama.cpp's default when the file does
    // not say (SentencePiece yes, BPE no); never without a BOS token.
    bool adds_bos() const { return bos_id_ >= 0 && add_bos_explicit_.value_or(add_bos_); }

    // The raw bytes a token stands for (may be part of a UTF-8 character).
    // Control and unknown tokens give their text only when `render_special`
    // is set.
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
    // tokenizer.chat_template (Jinja), empty when the file has none.
    const std::string& chat_template() const { return chat_template_; }

private:
    Tokenizer(std::string_view pre_name)
        : pre_(pre_name) {}
    void read_merges(const gguf::GgufFile& file); // byte-level BPE's
    void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
    // `after_special`: the text starts the input or follows a special token
    // (SentencePiece's leading space goes only there).
    void encode_plain(std::string_view text, bool after_special, std::vector<TokenId>& out) const;

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
    std::array<TokenId, 256> byte_tokens_{}; // token of each single byte
    // Special tokens by their text's first byte, longest text first (Gemma
    // has 6,414: a scan of them all at every byte would dominate encoding).
    struct Special {
        std::string text;
        TokenId id;
        bool always; // user-defined: matched without parse_special
    };
    std::array<std::vector<Special>, 256> specials_;
    bool any_special_ = false;
    std::optional<SentencePieceEncoder> sentencepiece_; // model "llama"
    bool space_prefix_ = false;                         // SentencePiece's leading space
    TokenId bos_id_ = -1;
    bool add_bos_ = true;                  // the tokenizer model's default
    std::optional<bool> add_bos_explicit_; // what the file says
    TokenId eos_id_ = -1;
    TokenId unknown_id_ = -1;
    std::string chat_template_;
};

} // namespace kvscope::tokenizer
