#include "profiler/attach/token_text.h"

#include "engine/tokenizer/printable_text.h"

namespace kvscope::attach {

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
    return tokenizer::printable_text(raw, max_chars);
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
