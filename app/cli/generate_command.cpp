// `kvscope generate`: one prompt through the serving engine
// (session::generate), the text streamed as it is produced, then prefill and
// decode speed and, with speculative decoding, what the drafts came to.
#include "app/cli/command.h"
#include "app/cli/engine_options.h"
#include "app/cli/run_report.h"
#include "app/cli/speculative_options.h"
#include "app/cli/stop_request.h"
#include "engine/session/backend_factory.h"
#include "engine/session/generation.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/utf8_stream.h"

#include <cstdio>
#include <iostream>
#include <random>

namespace kvscope::cli {
namespace {

struct GenerateOptions {
    EngineOptions engine;
    SpeculativeOptions speculative;
    std::string prompt;
    bool chat = false;
    std::string system;
    int max_tokens = 256;
    sampling::SamplingParams sampling;
    std::optional<std::uint64_t> seed;
};

int run_generate(GenerateOptions& options) {
    if (const std::string problem = options.engine.resolve(); !problem.empty()) {
        std::cerr << "kvscope generate: " << problem << "\n";
        return exit_usage;
    }
    if (const std::string problem = options.speculative.resolve(); !problem.empty()) {
        std::cerr << "kvscope generate: " << problem << "\n";
        return exit_usage;
    }
    sampling::SamplingParams sampling = options.sampling;
    sampling.seed = options.seed.value_or(std::random_device{}());
    if (const std::string problem = sampling.problem(); !problem.empty()) {
        std::cerr << "kvscope generate: " << problem << "\n";
        return exit_usage;
    }

    const auto model = options.engine.load_model();
    const tokenizer::Tokenizer& tok = model->tokenizer();
    if (options.chat && !tokenizer::speaks_chatml(tok)) {
        std::cerr << "--chat renders ChatML, and this model's vocabulary has no <|im_start|> "
                     "token (its chat template differs); give the prompt as plain text\n";
        return exit_usage;
    }
    // In chat mode the template's markers are special tokens; a plain prompt
    // is taken literally.
    workload::WorkloadRequest request;
    request.text = options.prompt;
    request.chat = options.chat;
    request.system = options.system;
    request.max_tokens = options.max_tokens;
    request.sampling = sampling;
    session::RunConfig config = options.engine.config;
    config.speculative = options.speculative.config;
    config.draft_model_path = options.speculative.draft_model;

    const StopRequest stop; // Ctrl-C ends the text where it got to
    tokenizer::Utf8StreamDecoder decoder;
    session::GenerateHooks hooks;
    hooks.on_token = [&](std::int32_t id) {
        std::cout << decoder.push(tok.token_bytes(id)) << std::flush;
        return !StopRequest::requested();
    };
    hooks.stop_requested = [] {
        return StopRequest::requested();
    };
    hooks.on_ready = [](const session::ServingSession& run) { // before a long generation
        if (!run.backend_note().empty()) {
            std::cerr << run.backend_note() << "\n";
        }
        std::cerr << "backend: " << session::describe_backend(run.backend()) << "\n";
    };
    session::GenerationStats stats;
    try {
        stats = session::generate(config, model, request, hooks);
    } catch (const std::invalid_argument& error) { // the prompt: a usage error
        std::cerr << "kvscope generate: " << error.what() << "\n";
        return exit_usage;
    }
    std::cout << decoder.finish() << "\n" << std::flush;

    std::fprintf(stderr,
                 "\nprompt: %d tokens, prefill %.1f tokens/s (%.3f s)\n"
                 "output: %d tokens, decode %.1f tokens/s (%.3f s), stopped by %s\n",
                 stats.prompt_tokens, stats.prefill_tokens_per_second(), stats.prefill_seconds,
                 stats.generated_tokens, stats.decode_tokens_per_second(), stats.decode_seconds,
                 stats.stop_reason.c_str());
    if (config.speculative.enabled()) {
        std::fprintf(stderr, "speculation: %s\n",
                     speculation_text(config.speculative, stats.speculation).c_str());
    }
    std::fprintf(stderr, "seed: %llu\n", static_cast<unsigned long long>(sampling.seed));
    return StopRequest::requested() ? 128 + StopRequest::signal() : exit_ok;
}

} // namespace

Command add_generate_command(CLI::App& app) {
    auto options = std::make_shared<GenerateOptions>();
    CLI::App* parser = app.add_subcommand("generate", "Generate text from a prompt, streamed, "
                                                      "then print prefill and decode speed");
    parser->add_option("-p,--prompt", options->prompt, "The prompt text")->required();
    parser->add_flag("--chat", options->chat,
                     "Wrap the prompt in the model's chat template (ChatML) as a user turn");
    parser
        ->add_option("--system", options->system,
                     "System prompt for --chat (default: the model's own)")
        ->needs(parser->get_option("--chat"));
    parser->add_option("-n,--max-tokens", options->max_tokens, "Most tokens to generate")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    parser
        ->add_option("--temperature,--temp", options->sampling.temperature,
                     "Sampling temperature; 0 is greedy")
        ->check(CLI::Range(0.0, 100.0))
        ->capture_default_str();
    parser->add_option("--top-k", options->sampling.top_k, "Keep the k most likely tokens; 0 off")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    parser->add_option("--top-p", options->sampling.top_p, "Nucleus sampling mass; 1 off")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    parser
        ->add_option("--min-p", options->sampling.min_p,
                     "Drop tokens below this fraction of the top one's probability; 0 off")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    parser
        ->add_option("--repeat-penalty", options->sampling.repetition_penalty,
                     "Penalty for recently seen tokens; 1 off")
        ->check(CLI::Range(0.01, 100.0))
        ->capture_default_str();
    parser
        ->add_option("--repeat-last-n", options->sampling.repetition_window,
                     "How many recent tokens the penalty considers")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    parser->add_option("-s,--seed", options->seed,
                       "Random seed (default: random, printed at the end)");
    options->engine.add_to(*parser);
    options->speculative.add_to(*parser);
    return {parser, [options] {
                return run_generate(*options);
            }};
}

} // namespace kvscope::cli
