#include "engine/tokenizer/tokenizer.h"

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/byte_level.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvscope::tokenizer {

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& file) {
    const std::string& model = file.require_string("tokenizer.ggml.model");
    if (model != "gpt2" && model != "llama") {
        file.fail("tokenizer model '" + model +
                  "' is not supported (kvscope implements byte-level BPE, 'gpt2', and "
                  "SentencePiece, 'llama')");
    }
    std::string pre_name = "default";
    if (const gguf::MetadataValue* pre = file.find("tokenizer.ggml.pre")) {
        if (const std::string* name = pre->as_string()) {
            pre_name = *name;
        }
    }
    Tokenizer tokenizer = [&] {
        try {
            return Tokenizer(pre_name);
        } catch (const std::invalid_argument& error) {
            file.fail(error.what());
        }
    }();

    const gguf::MetadataArray& tokens = file.require_array("tokenizer.ggml.tokens");
    tokenizer.tokens_.reserve(tokens.items.size());
    for (std::size_t i = 0; i < tokens.items.size(); ++i) {
        const std::string* text = tokens.items[i].as_string();
        if (text == nullptr) {
            file.fail("tokenizer.ggml.tokens[" + std::to_string(i) + "] is not a string");
        }
        tokenizer.tokens_.push_back(*text);
        tokenizer.token_ids_.emplace(*text, static_cast<TokenId>(i)); // first wins on duplicates
    }
    const std::size_t vocab = tokenizer.tokens_.size();
    if (vocab == 0 || vocab > static_cast<std::size_t>(std::numeric_limits<TokenId>::max())) {
        file.fail("tokenizer.ggml.tokens has " + std::to_string(vocab) + " entries");
    }

    tokenizer.types_.assign(vocab, TokenType::Normal);
    if (file.find("tokenizer.ggml.token_type") != nullptr) {
        const gguf::MetadataArray& types = file.require_array("tokenizer.ggml.token_type");
        if (types.items.size() != vocab) {
            file.fail("tokenizer.ggml.token_type has " + std::to_string(types.items.size()) +
                      " entries for " + std::to_string(vocab) + " tokens");
        }
        for (std::size_t i = 0; i < vocab; ++i) {
            const auto type = types.items[i].as_int();
            if (!type || *type < 0 || *type > 6) {
                file.fail("tokenizer.ggml.token_type[" + std::to_string(i) + "] is invalid");
            }
            tokenizer.types_[i] = static_cast<TokenType>(*type);
        }
    }

    const auto optional_id = [&](const char* key) -> TokenId {
        const gguf::MetadataValue* value = file.find(key);
        if (value == nullptr) {
            return -1;
        }
        const auto id = value->as_uint();
        if (!id || *id >= vocab) {
            file.fail(std::string(key) + " is not a token id below " + std::to_string(vocab));
        }
        return static_cast<TokenId>(*id);
    };
    tokenizer.bos_id_ = optional_id("tokenizer.ggml.bos_token_id");
    if (const gguf::MetadataValue* add_bos = file.find("tokenizer.ggml.add_bos_token")) {
        const auto flag = add_bos->as_bool();
        if (!flag) {
            file.fail("tokenizer.ggml.add_bos_token is not a boolean");
        }
        tokenizer.add_bos_explicit_ = *flag;
    }
    if (const gguf::MetadataValue* chat = file.find("tokenizer.chat_template");
        chat != nullptr && chat->as_string()) {
        tokenizer.chat_template_ = *chat->as_string();
    }
    tokenizer.eos_id_ = optional_id("tokenizer.ggml.eos_token_id");
    tokenizer.unknown_id_ = optional_id("tokenizer.ggml.unknown_token_id");
    if (tokenizer.unknown_id_ < 0) { // the vocabulary's own unknown piece, if it has one
        const auto unknown =
            std::find(tokenizer.types_.begin(), tokenizer.types_.end(), TokenType::Unknown);
        if (unknown != tokenizer.types_.end()) {
            tokenizer.unknown_id_ = static_cast<TokenId>(unknown - tokenizer.types_.begin());
        }
    }

    if (model == "llama") {
        const gguf::MetadataArray& scores = file.require_array("tokenizer.ggml.scores");
        if (scores.items.size() != vocab) {
            file.fail("tokenizer.ggml.scores has " + std::to_string(scores.items.size()) +
                      " entries for " + std::to_string(vocab) + " tokens");
        }
        std::vector<float> score_values(vocab);
        for (std::size_t i = 0; i < vocab; ++i) {
            const auto score = scores.items[i].as_float();
            if (!score || !std::isfinite(*score)) {
                file.fail("tokenizer.ggml.scores[" + std::to_string(i) +
                          "] is not a finite number");
            }
            score_values[i] = static_cast<float>(*score);
        }
        tokenizer.sentencepiece_.emplace(tokenizer.tokens_, std::move(score_values),
                                         tokenizer.types_, tokenizer.unknown_id_);
        // llama.cpp's default for SentencePiece files that do not say.
        tokenizer.space_prefix_ = true;
        if (const gguf::MetadataValue* prefix = file.find("tokenizer.ggml.add_space_prefix")) {
            const auto flag = prefix->as_bool();
            if (!flag) {
                file.fail("tokenizer.ggml.add_space_prefix is not a boolean");
            }
            tokenizer.space_prefix_ = *flag;
        }
    } else {
        tokenizer.add_bos_ = false; // llama.cpp's default for BPE files that do not say
        tokenizer.read_merges(file);
        for (int b = 0; b < 256; ++b) {
            std::string symbol;
            append_utf8(symbol, byte_to_symbol(static_cast<std::uint8_t>(b)));
            tokenizer.byte_tokens_[static_cast<std::size_t>(b)] = tokenizer.find(symbol);
        }
    }
    for (std::size_t i = 0; i < vocab; ++i) {
        const auto id = static_cast<TokenId>(i);
        if (tokenizer.is_special(id) && !tokenizer.tokens_[i].empty()) {
            const auto first = static_cast<unsigned char>(tokenizer.tokens_[i].front());
            tokenizer.specials_[first].push_back(
                {tokenizer.tokens_[i], id, tokenizer.token_type(id) == TokenType::UserDefined});
            tokenizer.any_special_ = true;
        }
    }
    for (std::vector<Special>& bucket : tokenizer.specials_) {
        std::stable_sort(bucket.begin(), bucket.end(), [](const Special& a, const Special& b) {
            return a.text.size() > b.text.size();
        });
    }
    return tokenizer;
}

void Tokenizer::read_merges(const gguf::GgufFile& file) {
    const gguf::MetadataArray& merges = file.require_array("tokenizer.ggml.merges");
    for (std::size_t rank = 0; rank < merges.items.size(); ++rank) {
        const std::string* merge = merges.items[rank].as_string();
        const std::size_t space = merge != nullptr ? merge->find(' ', 1) : std::string::npos;
        if (space == std::string::npos) {
            file.fail("tokenizer.ggml.merges[" + std::to_string(rank) + "] is not \"A B\"");
        }
        const TokenId left = find(std::string_view(*merge).substr(0, space));
        const TokenId right = find(std::string_view(*merge).substr(space + 1));
        const TokenId merged = find(merge->substr(0, space) + merge->substr(space + 1));
        if (left < 0 || right < 0 || merged < 0) {
            continue; // a merge whose parts are not tokens can never apply
        }
        // The earliest (lowest-rank) rule for a pair wins.
        merges_.emplace(pair_key(left, right), Merge{static_cast<std::int32_t>(rank), merged});
    }
}

bool Tokenizer::is_special(TokenId id) const {
    const TokenType type = token_type(id);
    return type == TokenType::Control || type == TokenType::UserDefined;
}

bool Tokenizer::ends_generation(TokenId id) const {
    if (id == eos_id_) {
        return true;
    }
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !is_special(id)) {
        return false;
    }
    const std::string& text = tokens_[static_cast<std::size_t>(id)];
    return text == "<|im_end|>" || text == "<|endoftext|>" || text == "<|eot_id|>" ||
           text == "<|end_of_text|>" || text == "</s>" || text == "<end_of_turn>" ||
           text == "<eos>";
}

TokenId Tokenizer::find(std::string_view text) const {
    const auto it = token_ids_.find(std::string(text));
    return it == token_ids_.end() ? -1 : it->second;
}

std::vector<TokenId> Tokenizer::encode_sequence(std::string_view text, bool parse_special) const {
    std::vector<TokenId> ids;
    if (adds_bos()) {
        ids.push_back(bos_id_);
    }
    const std::vector<TokenId> rest = encode(text, parse_special);
    ids.insert(ids.end(), rest.begin(), rest.end());
    return ids;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool parse_special) const {
    std::vector<TokenId> out;
    // Cut the text at special-token texts (the longest one where several
    // start at the same place; control tokens only when asked) and tokenize
    // the stretches between as text.
    std::size_t plain_from = 0;
    std::size_t i = 0;
    bool after_special = true;
    while (i < text.size() && any_special_) {
        const Special* hit = nullptr;
        for (const Special& special : specials_[static_cast<unsigned char>(text[i])]) {
            if ((parse_special || special.always) &&
                text.compare(i, special.text.size(), special.text) == 0) {
                hit = &special;
                break;
            }
        }
        if (hit == nullptr) {
            ++i;
            continue;
        }
        encode_plain(text.substr(plain_from, i - plain_from), after_special, out);
        out.push_back(hit->id);
        after_special = true;
        i += hit->text.size();
        plain_from = i;
    }
    encode_plain(text.substr(plain_from), after_special, out);
    return out;
}

void Tokenizer::encode_plain(std::string_view text, bool after_special,
                             std::vector<TokenId>& out) const {
    if (text.empty()) {
        return;
    }
    if (sentencepiece_) {
        sentencepiece_->encode(text, space_prefix_ && after_special, out);
        return;
    }
    for (const std::string_view piece : pre_.split(text)) {
        encode_piece(piece, out);
    }
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
    // A whole piece that is a token needs no merging (most words).
    const std::string symbols = bytes_to_symbols(piece);
    if (const TokenId whole = find(symbols); whole >= 0) {
        out.push_back(whole);
        return;
    }
    std::vector<TokenId> parts;
    parts.reserve(piece.size());
    for (const char c : piece) {
        const TokenId id = byte_tokens_[static_cast<std::uint8_t>(c)];
        if (id >= 0) {
            parts.push_back(id);
        } else if (unknown_id_ >= 0) {
            parts.push_back(unknown_id_);
        }
    }
    // Apply the lowest-rank merge present, leftmost first, until none applies.
    while (parts.size() > 1) {
        std::int32_t best_rank = std::numeric_limits<std::int32_t>::max();
        std::size_t best_at = 0;
        TokenId best_merged = -1;
        for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
            const auto it = merges_.find(pair_key(parts[k], parts[k + 1]));
            if (it != merges_.end() && it->second.rank < best_rank) {
                best_rank = it->second.rank;
                best_at = k;
                best_merged = it->second.merged;
            }
        }
        if (best_merged < 0) {
            break;
        }
        parts[best_at] = best_merged;
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
    out.insert(out.end(), parts.begin(), parts.end());
}

std::string Tokenizer::token_bytes(TokenId id, bool render_special) const {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) {
        return {};
    }
    const std::string& text = tokens_[static_cast<std::size_t>(id)];
    const TokenType type = token_type(id);
    if (type == TokenType::Control || type == TokenType::Unknown) {
        return render_special ? text : std::string();
    }
    if (sentencepiece_) {
        return SentencePieceEncoder::piece_bytes(text, type);
    }
    return type == TokenType::UserDefined ? text : symbols_to_bytes(text);
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool render_special) const {
    std::string out;
    for (const TokenId id : ids) {
        out += token_bytes(id, render_special);
    }
    return out;
}

} // namespace kvscope::tokenizer
