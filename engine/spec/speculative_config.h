// Speculative decoding's settings: how drafts are proposed (prompt lookup,
// or the target's own first layers), how many tokens a step drafts, and
// their command-line form ("ngram:4", "draft:4").
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvscope::spec {

enum class DraftMethod {
    none,
    // Prompt lookup (vLLM's ngram method): the tokens that followed the
    // latest earlier occurrence of the sequence's last n tokens. No model.
    ngram,
    // Self-speculative drafting (Draft & Verify, LayerSkip): the target's
    // first draft_layers layers and its output head propose the tokens.
    layers,
    // A smaller model with the same tokenizer (--draft-model), with a KV
    // pool of its own indexed by the target's block tables.
    model,
};

std::string_view draft_method_name(DraftMethod method);

struct SpeculativeConfig {
    DraftMethod method = DraftMethod::none;
    int draft_tokens = 4; // K: tokens drafted, then verified in one pass
    int ngram_min = 2;    // shortest suffix prompt lookup matches (1 drafts after any repeat)
    int ngram_max = 5;    // longest, tried first
    int draft_layers = 0; // layers of the self-draft (DraftMethod::layers)

    bool enabled() const { return method != DraftMethod::none && draft_tokens > 0; }
    // Empty when the settings make sense for a model of `model_layers`
    // layers (0: unknown), else what is wrong.
    std::string problem(int model_layers) const;
    // "ngram:4 (prompt lookup)", "draft:4 (self-draft from the first 12 layers)".
    std::string describe() const;
};

// Reads "ngram:K" or "draft:K" (K defaults to 4 when left out) and "off".
// draft needs a drafter: `draft_layers` > 0 (the self-draft's layers) or
// `draft_model` (a separate model). nullopt, with `error` set, for anything
// else.
std::optional<SpeculativeConfig> parse_speculative(std::string_view text, int draft_layers,
                                                   std::string& error, bool draft_model = false);

} // namespace kvscope::spec
