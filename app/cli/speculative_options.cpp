#include "app/cli/speculative_options.h"

#include "app/cli/model_option.h"

namespace kvscope::cli {

void SpeculativeOptions::add_to(CLI::App& app) {
    app.add_option("--speculative", method,
                   "Speculative decoding: ngram:K drafts K tokens by prompt lookup (what "
                   "followed the last tokens' earlier occurrence), draft:K with the target's "
                   "first --draft-layers layers; one pass verifies them, rejected tokens' KV "
                   "is rolled back")
        ->default_str("off");
    app.add_option("--draft-layers", draft_layers,
                   "Layers of the self-draft (the target's first N, then its output head); "
                   "alone it means --speculative draft:4")
        ->check(CLI::Range(1, 1 << 10));
    app.add_option("--draft-model", draft_model,
                   "A smaller GGUF model with the target's tokenizer that drafts (its own KV pool, "
                   "the target's blocks); alone it means --speculative draft:4")
        ->check(model_file_or_name());
}

std::string SpeculativeOptions::resolve() {
    if (draft_layers > 0 && !draft_model.empty()) {
        return "--draft-layers and --draft-model are two drafters: choose one";
    }
    if (method.empty()) { // not given: a drafter alone means draft:4
        method = draft_layers > 0 || !draft_model.empty() ? "draft" : "off";
    }
    std::string error;
    const std::optional<spec::SpeculativeConfig> parsed =
        spec::parse_speculative(method, draft_layers, error, !draft_model.empty());
    if (!parsed) {
        return "--speculative " + method + ": " + error;
    }
    if ((draft_layers > 0 || !draft_model.empty()) && parsed->method != spec::DraftMethod::layers &&
        parsed->method != spec::DraftMethod::model) {
        return std::string(draft_layers > 0 ? "--draft-layers" : "--draft-model") +
               " goes with --speculative draft:K, not " + method;
    }
    config = *parsed;
    return {};
}

} // namespace kvscope::cli
