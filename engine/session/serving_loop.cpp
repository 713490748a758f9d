#include "engine/session/serving_loop.h"

#include "engine/tokenizer/chat_template.h"

#include <chrono>
#include <thread>

namespace kvscope::session {

std::vector<sched::RequestSpec>
to_request_specs(const std::vector<workload::WorkloadRequest>& requests,
                 const tokenizer::Tokenizer& tokenizer,
                 const sampling::SamplingParams& default_sampling) {
    std::vector<sched::RequestSpec> specs;
    specs.reserve(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const workload::WorkloadRequest& r = requests[i];
        sched::RequestSpec spec;
        spec.arrival_seconds = r.arrival_seconds;
        spec.max_tokens = r.max_tokens;
        spec.sampling = r.sampling.value_or(default_sampling);
        if (!r.ids.empty()) {
            for (const std::int32_t id : r.ids) {
                if (id < 0 || static_cast<std::size_t>(id) >= tokenizer.vocab_size()) {
                    throw std::invalid_argument("request " + std::to_string(i + 1) + ": token id " +
                                                std::to_string(id) +
                                                " is outside the vocabulary (" +
                                                std::to_string(tokenizer.vocab_size()) + ")");
                }
            }
            spec.prompt = r.ids;
        } else if (r.chat) {
            std::vector<tokenizer::ChatMessage> messages;
            if (!r.system.empty()) {
                messages.push_back({"system", r.system});
            }
            for (std::size_t k = 0; k < r.history.size(); ++k) {
                messages.push_back({k % 2 == 0 ? "user" : "assistant", r.history[k]});
            }
            messages.push_back({"user", r.text});
            spec.prompt =
                tokenizer.encode_sequence(tokenizer::render_conversation(tokenizer, messages),
                                          tokenizer::speaks_chatml(tokenizer));
        } else {
            spec.prompt = tokenizer.encode_sequence(r.text, false);
        }
        specs.push_back(std::move(spec));
    }
    return specs;
}

std::vector<std::int64_t> drive(sched::LlmEngine& engine,
                                const std::vector<sched::RequestSpec>& specs,
                                const DriveOptions& options) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    std::vector<std::int64_t> ids;
    std::size_t next = 0;
    while (next < specs.size() || engine.has_unfinished()) {
        if (options.stop_requested && options.stop_requested()) {
            for (const std::int64_t id : ids) {
                engine.abort(id);
            }
            break;
        }
        const double now = std::chrono::duration<double>(clock::now() - start).count();
        while (next < specs.size() && (!options.real_time || specs[next].arrival_seconds <= now)) {
            ids.push_back(engine.add_request(specs[next]));
            ++next;
        }
        if (!engine.has_unfinished()) {
            if (next < specs.size()) { // idle until the next arrival
                const double wait = specs[next].arrival_seconds - now;
                std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.05)));
            }
            continue;
        }
        if (options.before_step) {
            options.before_step();
            if (options.stop_requested && options.stop_requested()) {
                continue; // asked while waiting: the loop's top stops the run
            }
        }
        const sched::StepStats stats = engine.step();
        if (options.on_step) {
            options.on_step(stats);
        }
    }
    return ids;
}

} // namespace kvscope::session
