#include "engine/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdexcept>

namespace kvscope::tokenizer {
namespace {

// GPT-2's split: contractions, letters, numbers, other symbols, whitespace
// (a whitespace run gives up its last character to a following word).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3's split: case-insensitive contractions, numbers in groups of three.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Every digit on its own, applied before the GPT-2 split (SmolLM, StarCoder).
constexpr const char* kDigits = R"(\p{N})";

struct Recipe {
    const char* name;
    std::vector<const char*> regexes; // applied in turn to the pieces so far
};

const std::vector<Recipe>& recipes() {
    static const std::vector<Recipe> all{
        {"gpt2", {kGpt2}},
        {"default", {kGpt2}},
        {"smollm", {kDigits, kGpt2}},
        {"starcoder", {kDigits, kGpt2}},
        {"refact", {kDigits, kGpt2}},
        {"llama-bpe", {kLlama3}},
        {"llama3", {kLlama3}},
    };
    return all;
}

struct CompiledRegex {
    pcre2_code* code = nullptr;
    ~CompiledRegex() { pcre2_code_free(code); }
};

} // namespace

struct PreTokenizer::Patterns {
    std::vector<std::unique_ptr<CompiledRegex>> regexes;
};

PreTokenizer::PreTokenizer(std::string_view pre_name)
    : patterns_(std::make_unique<Patterns>()) {
    const Recipe* recipe = nullptr;
    for (const Recipe& candidate : recipes()) {
        if (pre_name == candidate.name) {
            recipe = &candidate;
        }
    }
    if (recipe == nullptr) {
        std::string known;
        for (const std::string& name : known_names()) {
            known += (known.empty() ? "" : ", ") + name;
        }
        throw std::invalid_argument("unsupported pre-tokenizer '" + std::string(pre_name) +
                                    "' (kvscope knows: " + known + ")");
    }
    for (const char* pattern : recipe->regexes) {
        int error = 0;
        PCRE2_SIZE error_offset = 0;
        auto compiled = std::make_unique<CompiledRegex>();
        // MATCH_INVALID_UTF: text from users may be invalid UTF-8; such bytes
        // simply never match and stay as pieces of their own.
        compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error,
                                       &error_offset, nullptr);
        if (compiled->code == nullptr) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof message);
            throw std::logic_error("pre-tokenizer regex failed to compile: " +
                                   std::string(reinterpret_cast<const char*>(message)));
        }
        pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE); // falls back to the interpreter
        patterns_->regexes.push_back(std::move(compiled));
    }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string> PreTokenizer::known_names() {
    std::vector<std::string> names;
    for (const Recipe& recipe : recipes()) {
        names.emplace_back(recipe.name);
    }
    return names;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (text.empty()) {
        return pieces;
    }
    pieces.push_back(text);
    for (const auto& regex : patterns_->regexes) {
        pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex->code, nullptr);
        std::vector<std::string_view> next;
        for (const std::string_view piece : pieces) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
            std::size_t offset = 0;
            std::size_t unmatched_from = 0;
            while (offset < piece.size()) {
                const int rc =
                    pcre2_match(regex->code, subject, piece.size(), offset, 0, match, nullptr);
                if (rc < 0) {
                    break; // no further match (or a matching error): the rest stays whole
                }
                const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
                const std::size_t start = ovector[0];
                const std::size_t end = ovector[1];
                if (start > unmatched_from) {
                    next.push_back(piece.substr(unmatched_from, start - unmatched_from));
                }
                if (end > start) {
                    next.push_back(piece.substr(start, end - start));
                    offset = end;
                } else {
                    offset = start + 1; // empty match: step over one byte
                }
                unmatched_from = std::max(unmatched_from, end);
            }
            if (unmatched_from < piece.size()) {
                next.push_back(piece.substr(unmatched_from));
            }
        }
        pcre2_match_data_free(match);
        pieces = std::move(next);
    }
    return pieces;
}

} // namespace kvscope::tokenizer
