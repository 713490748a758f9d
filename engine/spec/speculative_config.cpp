#include "engine/spec/speculative_config.h"

#include <charconv>

namespace kvscope::spec {

std::string_view draft_method_name(DraftMethod method) {
    switch (method) {
    case DraftMethod::none:
        return "off";
    case DraftMethod::ngram:
        return "ngram";
    case DraftMethod::layers:
    case DraftMethod::model:
        return "draft";
    }
    return "unknown";
}

std::string SpeculativeConfig::problem(int model_layers) const {
    if (method == DraftMethod::none) {
        return {};
    }
    if (draft_tokens < 1 || draft_tokens > 32) {
        return "the draft length must be between 1 and 32 tokens";
    }
    if (method == DraftMethod::ngram && (ngram_min < 1 || ngram_max < ngram_min)) {
        return "prompt lookup needs 1 <= ngram_min <= ngram_max";
    }
    if (method == DraftMethod::layers) {
        if (draft_layers < 1) {
            return "draft:K needs a drafter: --draft-layers N (the target's first N layers) or "
                   "--draft-model FILE.gguf";
        }
        if (model_layers > 0 && draft_layers >= model_layers) {
            return "--draft-layers " + std::to_string(draft_layers) +
                   " must be fewer than the model's " + std::to_string(model_layers) + " layers";
        }
    }
    return {};
}

std::string SpeculativeConfig::describe() const {
    if (!enabled()) {
        return "no speculative decoding";
    }
    const std::string form =
        std::string(draft_method_name(method)) + ":" + std::to_string(draft_tokens);
    switch (method) {
    case DraftMethod::ngram:
        return form + " (prompt lookup)";
    case DraftMethod::layers:
        return form + " (self-draft from the first " + std::to_string(draft_layers) + " layers)";
    default:
        return form + " (draft model)";
    }
}

std::optional<SpeculativeConfig> parse_speculative(std::string_view text, int draft_layers,
                                                   std::string& error, bool draft_model) {
    SpeculativeConfig config;
    if (text.empty() || text == "off" || text == "none") {
        return config;
    }
    const std::size_t colon = text.find(':');
    const std::string_view method = text.substr(0, colon);
    if (method == "ngram") {
        config.method = DraftMethod::ngram;
    } else if (method == "draft" && draft_model) {
        config.method = DraftMethod::model;
    } else if (method == "draft") {
        config.method = DraftMethod::layers;
        config.draft_layers = draft_layers;
    } else {
        error = "unknown speculative method '" + std::string(method) +
                "' (ngram:K for prompt lookup, draft:K with --draft-layers N, or off)";
        return std::nullopt;
    }
    if (colon != std::string_view::npos) {
        const std::string_view count = text.substr(colon + 1);
        const auto [end, ec] =
            std::from_chars(count.data(), count.data() + count.size(), config.draft_tokens);
        if (ec != std::errc() || end != count.data() + count.size()) {
            error = "'" + std::string(count) + "' is not a number of draft tokens";
            return std::nullopt;
        }
    }
    if (std::string problem = config.problem(0); !problem.empty()) {
        error = std::move(problem);
        return std::nullopt;
    }
    return config;
}

} // namespace kvscope::spec
