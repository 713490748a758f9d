// SentencePiece's BPE, as GGUF files with tokenizer.ggml.model "llama" need
// it (Gemma, Llama 2, older Mistral): pieces merged by score rather than by a
// list of merges. Spaces are written U+2581 ("▁"); a character no piece
// covers falls back to its bytes' <0xXX> pieces. Only normal, user-defined
// and unused pieces come out of merges, never control or byte pieces, as in
// sentencepiece's own encoder (checked against it: tst_tokenizer).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvscope::tokenizer {

using TokenId = std::int32_t;
enum class TokenType : std::int32_t;

class SentencePieceEncoder {
public:
    // `pieces`, `scores` and `types` are the file's, index = token id.
    SentencePieceEncoder(const std::vector<std::string>& pieces, std::vector<float> scores,
                         const std::vector<TokenType>& types, TokenId unknown_id);

    // Appends the ids of `text` (plain text: special tokens are cut out by
    // the caller). With `space_prefix`, a space is put before it first.
    void encode(std::string_view text, bool space_prefix, std::vector<TokenId>& out) const;

    // The bytes `piece` (a token's text) stands for: "▁" is a space and a
    // byte piece "<0xXX>" is that byte.
    static std::string piece_bytes(std::string_view piece, TokenType type);

private:
    // Heterogeneous look-up: string_views find std::string keys unconverted.
    struct TextHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view text) const {
            return std::hash<std::string_view>{}(text);
        }
    };
    using Parts = std::unordered_map<std::string, std::pair<std::string, std::string>, TextHash,
                                     std::equal_to<>>;

    TokenId mergeable(std::string_view text) const; // -1 when no merge may make it
    void output_symbol(std::string_view symbol, const Parts& unused_parts,
                       std::vector<TokenId>& out) const;

    // Normal, user-defined and unused pieces: what merges may make.
    std::unordered_map<std::string, TokenId, TextHash, std::equal_to<>> mergeable_;
    std::vector<float> scores_;
    std::vector<TokenType> types_;
    std::vector<TokenId> byte_pieces_; // the <0xXX> piece of each byte, -1 when absent
    TokenId unknown_id_;
};

} // namespace kvscope::tokenizer
