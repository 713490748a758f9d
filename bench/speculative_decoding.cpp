// Speculative decoding's wall-clock speed-up over plain decoding, side by
// side in one run: each task's chat prompt served alone (batch 1, greedy)
// plainly and with each drafter, the order rotated every round so drift on
// a shared machine hits all alike. Decode speed counts the tokens after the
// first over the steps that made them; the speed-up is each round's ratio
// to plain decoding in that round, then the median. Greedy output must be
// the same token for token, and the table says whether it was.
//
//   kvscope-bench-speculative [--rounds N] [--tokens T] [--methods M,...]
//                             [--draft-layers L | --draft-model FILE]
//                             [--backend auto|cpu|cuda] [--threads T] [--model FILE]
#include "engine/model/llama_model.h"
#include "engine/model_path.h"
#include "engine/sched/llm_engine.h"
#include "engine/session/backend_factory.h"
#include "engine/session/model_loading.h"
#include "engine/spec/speculative_config.h"
#include "engine/tokenizer/chat_template.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace kvscope;

namespace {

struct Task {
    const char* name;
    const char* prompt;
};

// Tasks whose answers quote their prompt to different degrees: an edit
// copies most of it (prompt lookup's best case), a summary some, a story
// none.
const Task kTasks[] = {
    {"edit",
     "Correct the spelling in this paragraph and write it out again in full, changing "
     "nothing else:\n\nThe lighthouse keeper climbed the stairs every evening at sunset. He "
     "checked the lamp, cleaned the glass, and wrote the wether in his log. Ships passed far "
     "out at sea, and none of them new his name, but all of them saw his light. In winter "
     "the storms came from the north and the waves broke over the rocks below the tower."},
    {"code", "Rename the variable `total` to `sum_of_values` in this Python function and show the "
             "whole function:\n\ndef average(values):\n    total = 0\n    for value in values:\n"
             "        total += value\n    if not values:\n        return 0\n    return total / "
             "len(values)\n"},
    {"story", "Write a short story about a cat who learns to sail."},
};

struct Result {
    double tokens_per_second = 0;
    std::int64_t drafted = 0;
    std::int64_t accepted = 0;
    std::int64_t verifies = 0;
    std::vector<std::int32_t> output;
};

Result serve_alone(runner::Backend& backend, runner::Backend* draft,
                   const std::vector<std::int32_t>& prompt,
                   const spec::SpeculativeConfig& speculative, int tokens,
                   const tokenizer::Tokenizer& tok) {
    sched::EngineConfig config;
    config.draft_backend = draft;
    config.prefix_caching = false; // every run computes the same prompt
    config.speculative = speculative;
    config.ends_generation = [&tok](std::int32_t id) {
        return tok.ends_generation(id);
    };
    sched::LlmEngine engine(backend, config);
    sched::RequestSpec spec;
    spec.prompt = prompt;
    spec.max_tokens = tokens;
    spec.sampling.temperature = 0;
    const std::int64_t id = engine.add_request(spec);
    double decode_seconds = 0;
    std::int64_t decode_tokens = 0;
    while (engine.has_unfinished()) {
        const sched::StepStats s = engine.step();
        if (s.prefill_tokens == 0 && s.decode_tokens > 0) {
            decode_seconds += s.seconds;
            decode_tokens += s.decode_tokens;
        }
    }
    const sched::Request& r = engine.request(id);
    Result result;
    result.tokens_per_second =
        decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0;
    result.drafted = r.accounting.drafted_tokens;
    result.accepted = r.accounting.accepted_tokens;
    result.verifies = r.accounting.verify_steps;
    result.output.assign(r.tokens.begin() + r.prompt_length(), r.tokens.end());
    return result;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Speculative decoding's speed-up over plain decoding, side by side"};
    int rounds = 3;
    int tokens = 160;
    int draft_layers = 16;
    int threads = 0;
    std::string backend_name = "cpu";
    std::string model_file;
    std::string draft_file;
    std::vector<std::string> methods{"ngram:2", "ngram:4", "ngram:8", "draft:2", "draft:4"};
    app.add_option("--rounds", rounds, "Rounds; each serves every task with every method")
        ->capture_default_str();
    app.add_option("--tokens", tokens, "Most tokens generated per task")->capture_default_str();
    app.add_option("--draft-layers", draft_layers, "Layers of the self-draft")
        ->capture_default_str();
    app.add_option("--methods", methods, "Speculative methods to compare with plain decoding")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--backend", backend_name, "auto, cpu or cuda")->capture_default_str();
    app.add_option("--threads", threads, "CPU threads (0: all)");
    app.add_option("--model", model_file, "GGUF model (default: the one setup.sh fetched)");
    app.add_option("--draft-model", draft_file,
                   "A draft model for the draft:K methods instead of the self-draft")
        ->check(CLI::ExistingFile);
    CLI11_PARSE(app, argc, argv);

    std::vector<spec::SpeculativeConfig> configs{spec::SpeculativeConfig{}};
    std::vector<std::string> names{"plain"};
    for (const std::string& m : methods) {
        std::string error;
        const auto parsed = spec::parse_speculative(m, draft_layers, error, !draft_file.empty());
        if (!parsed) {
            std::fprintf(stderr, "--methods %s: %s\n", m.c_str(), error.c_str());
            return 2;
        }
        configs.push_back(*parsed);
        names.push_back(parsed->method == spec::DraftMethod::layers
                            ? m + " (" + std::to_string(draft_layers) + " layers)"
                        : parsed->method == spec::DraftMethod::model ? m + " (draft model)"
                                                                     : m);
    }
    const ModelPath path = model_file.empty() ? resolve_model_path() : ModelPath{model_file, false};
    if (const std::string problem = model_path_problem(path); !problem.empty()) {
        std::fprintf(stderr, "%s\n", problem.c_str());
        return 1;
    }
    const std::shared_ptr<const model::LlamaModel> model = model::LlamaModel::load(path.path);
    const tokenizer::Tokenizer& tok = model->tokenizer();
    session::BackendSpec spec;
    spec.kind = session::parse_backend_kind(backend_name).value_or(session::BackendKind::cpu);
    spec.threads = threads;
    session::KvCacheSpec cache;
    cache.num_blocks = 128;
    const std::unique_ptr<runner::Backend> backend = session::make_backend(spec, model, cache);
    std::unique_ptr<runner::Backend> draft;
    if (!draft_file.empty()) {
        const auto draft_model = model::LlamaModel::load(draft_file);
        if (const std::string problem = session::draft_model_mismatch(*model, *draft_model);
            !problem.empty()) {
            std::fprintf(stderr, "%s\n", problem.c_str());
            return 2;
        }
        draft = session::make_backend(spec, draft_model, cache);
    }
    std::fprintf(stderr, "%s\n", session::describe_backend(*backend).c_str());

    std::vector<std::vector<std::int32_t>> prompts;
    for (const Task& task : kTasks) {
        prompts.push_back(
            tok.encode_sequence(tokenizer::render_chatml({{"user", task.prompt}}, true), true));
    }
    const std::size_t tasks = prompts.size();
    const std::size_t n = configs.size();
    // [task][config][round]
    std::vector<std::vector<std::vector<Result>>> results(tasks,
                                                          std::vector<std::vector<Result>>(n));
    serve_alone(*backend, draft.get(), prompts[0], configs[0], 8, tok); // warm up
    for (int r = 0; r < rounds; ++r) {
        for (std::size_t t = 0; t < tasks; ++t) {
            for (std::size_t k = 0; k < n; ++k) {
                const std::size_t c = (k + static_cast<std::size_t>(r)) % n; // rotate the order
                results[t][c].push_back(
                    serve_alone(*backend, draft.get(), prompts[t], configs[c], tokens, tok));
            }
        }
        std::fprintf(stderr, "round %d of %d done\n", r + 1, rounds);
    }

    std::printf("| task | method | decode tok/s (median) | speed-up (median of rounds) | "
                "draft kept | tokens per pass | output as plain |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | --- |\n");
    for (std::size_t t = 0; t < tasks; ++t) {
        for (std::size_t c = 0; c < n; ++c) {
            std::vector<double> speed;
            std::vector<double> ratio;
            std::int64_t drafted = 0;
            std::int64_t accepted = 0;
            std::int64_t verifies = 0;
            bool same = true;
            for (int r = 0; r < rounds; ++r) {
                const Result& x = results[t][c][static_cast<std::size_t>(r)];
                const Result& plain = results[t][0][static_cast<std::size_t>(r)];
                speed.push_back(x.tokens_per_second);
                ratio.push_back(plain.tokens_per_second > 0
                                    ? x.tokens_per_second / plain.tokens_per_second
                                    : 0);
                drafted += x.drafted;
                accepted += x.accepted;
                verifies += x.verifies;
                same = same && x.output == plain.output;
            }
            const bool speculative = configs[c].enabled();
            std::printf("| %s | %s | %.1f | %s | %s | %s | %s |\n", kTasks[t].name,
                        names[c].c_str(), median(speed),
                        speculative ? (std::to_string(median(ratio)).substr(0, 4) + "x").c_str()
                                    : "1 (reference)",
                        speculative && drafted > 0
                            ? (std::to_string(100 * accepted / drafted) + "%").c_str()
                            : "-",
                        speculative && verifies > 0
                            ? std::to_string(static_cast<double>(accepted + verifies) /
                                             static_cast<double>(verifies))
                                  .substr(0, 4)
                                  .c_str()
                            : "-",
                        c == 0 ? "-" : (same ? "yes" : "NO"));
        }
    }
    std::printf("\n%d rounds, up to %d tokens per task, batch 1, greedy; %s\n", rounds, tokens,
                session::describe_backend(*backend).c_str());
    return 0;
}
