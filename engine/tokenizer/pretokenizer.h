// Splits text into the pieces BPE runs on, with the regular expressions the
// model's GGUF names in `tokenizer.ggml.pre`. Uses PCRE2 with Unicode
// properties, so \p{L}, \p{N} and \s mean what they mean in the reference
// tokenizers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::tokenizer {

class PreTokenizer {
public:
    // Throws std::invalid_argument for a pre-tokenizer name kvscope does not know.
    explicit PreTokenizer(std::string_view pre_name);
    ~PreTokenizer();
    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;

    // The pieces of `text`, in order; their concatenation is `text`. Invalid
    // UTF-8 is kept (as pieces no pattern matched), never dropped.
    std::vector<std::string_view> split(std::string_view text) const;

    // Pre-tokenizer names this build understands.
    static std::vector<std::string> known_names();

private:
    struct Patterns;
    std::unique_ptr<Patterns> patterns_;
};

} // namespace kvscope::tokenizer
