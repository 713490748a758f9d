#include "engine/workload/workload.h"

#include "engine/workload/eval_texts.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace kvscope::workload {
namespace {

// A system prompt long enough (about 120 tokens) that sharing it matters.
constexpr std::string_view kSystemPrompt =
    "You are a patient teaching assistant for a university course on computer systems. "
    "Answer in plain English, in at most three short paragraphs. When a question is about "
    "performance, say what is measured and what limits it: memory bandwidth, compute, or "
    "latency. Prefer concrete numbers and small examples over general statements, say so "
    "when you are unsure, and never invent references. If a question is ambiguous, answer "
    "the most likely reading and mention the other one in a sentence. Students read your "
    "answers on a phone between lectures, so keep each answer short.";

constexpr std::string_view kQuestions[] = {
    "What is a KV cache?",
    "Why does decoding one token at a time leave a GPU mostly idle?",
    "What is the difference between prefill and decode?",
    "How does paged attention reduce memory fragmentation?",
    "What does a block table map?",
    "Why is prefix caching useful for chat assistants?",
    "What is continuous batching?",
    "When would a server preempt a request?",
    "What does quantising the KV cache to 8 bits cost in accuracy?",
    "Why do keys have outlier channels?",
    "What is grouped-query attention and why does it shrink the cache?",
    "How does a sliding window limit memory?",
    "What are attention sinks?",
    "Explain how a hash table works.",
    "What is the difference between latency and throughput?",
    "Why is memory bandwidth often the limit for small batches?",
    "What is a cache line?",
    "How does virtual memory use page tables?",
    "What is an LRU eviction policy?",
    "Why do transformers need positional information?",
    "What does RoPE rotate, and why?",
    "What is time to first token?",
    "How many bytes does one token of KV cache take in a small model?",
    "Why is reference counting needed when blocks are shared?",
};

constexpr std::string_view kTopics[] = {
    "the history of the printing press",
    "how bridges carry load",
    "why the sky is blue",
    "how vaccines train the immune system",
    "the rules of chess",
    "how compilers optimise loops",
    "what makes bread rise",
    "how tides work",
    "the causes of inflation",
    "how bees communicate",
    "the life cycle of stars",
    "how a bicycle stays upright",
};

constexpr std::string_view kAnswers[] = {
    "It stores the keys and values of earlier tokens so they are not computed again.",
    "Each step reads all the weights for very little arithmetic, so memory is the limit.",
    "Prefill processes the whole prompt at once; decode adds one token per step.",
    "It allocates fixed-size blocks on demand instead of one large region per request.",
};

double exponential_gap(std::mt19937_64& rng, double rate) {
    if (rate <= 0) {
        return 0;
    }
    return std::exponential_distribution<double>(rate)(rng);
}

template <typename T, std::size_t N>
std::string_view pick(std::mt19937_64& rng, const T (&items)[N]) {
    return items[std::uniform_int_distribution<std::size_t>(0, N - 1)(rng)];
}

std::vector<WorkloadRequest> shared_prefix(const PresetOptions& o, std::mt19937_64& rng) {
    std::vector<WorkloadRequest> out;
    double t = 0;
    for (int i = 0; i < o.requests; ++i) {
        WorkloadRequest r;
        r.arrival_seconds = t;
        r.chat = true;
        r.system = std::string(kSystemPrompt);
        r.text = std::string(pick(rng, kQuestions));
        r.max_tokens = o.max_tokens;
        out.push_back(std::move(r));
        t += exponential_gap(rng, o.rate);
    }
    return out;
}

std::vector<WorkloadRequest> multi_turn(const PresetOptions& o, std::mt19937_64& rng) {
    // Conversations of up to four turns; each turn resends the whole chat so
    // far, so turn k shares turn k-1's prompt as its prefix.
    std::vector<WorkloadRequest> out;
    const int turns = 4;
    const int conversations = std::max(1, (o.requests + turns - 1) / turns);
    double start = 0;
    for (int c = 0; c < conversations && static_cast<int>(out.size()) < o.requests; ++c) {
        std::vector<std::string> history;
        double t = start;
        for (int k = 0; k < turns && static_cast<int>(out.size()) < o.requests; ++k) {
            WorkloadRequest r;
            r.arrival_seconds = t;
            r.chat = true;
            r.system = std::string(kSystemPrompt);
            r.history = history;
            r.text = std::string(pick(rng, kQuestions));
            r.max_tokens = o.max_tokens;
            history.push_back(r.text);
            history.push_back(std::string(pick(rng, kAnswers)));
            out.push_back(std::move(r));
            t += 2.0 + exponential_gap(rng, 1.0); // the user reads, then types
        }
        start += exponential_gap(rng, o.rate) * turns;
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return a.arrival_seconds < b.arrival_seconds;
    });
    return out;
}

constexpr std::string_view kDocQuestions[] = {
    "Summarise the text above in three sentences.",
    "Who are the people named in the text above?",
    "What is the main argument of the text above?",
    "List three facts stated in the text above.",
    "What happens at the end of the text above?",
    "Quote the sentence of the text above you find most important.",
};

std::vector<WorkloadRequest> long_doc(const PresetOptions& o, std::mt19937_64& rng) {
    const std::vector<EvalText>& texts = eval_texts();
    if (texts.empty()) {
        throw std::runtime_error("this build has no evaluation texts (resources/eval)");
    }
    const EvalText& doc = texts[static_cast<std::size_t>(o.seed % texts.size())];
    std::vector<WorkloadRequest> out;
    double t = 0;
    for (int i = 0; i < o.requests; ++i) {
        WorkloadRequest r;
        r.arrival_seconds = t;
        r.chat = true;
        r.text = "Read this text.\n\n" + std::string(doc.text) + "\n\n" +
                 std::string(pick(rng, kDocQuestions));
        r.max_tokens = o.max_tokens;
        out.push_back(std::move(r));
        t += exponential_gap(rng, o.rate);
    }
    return out;
}

// A passage of about `length` characters from `text`, from a sentence's
// start to a sentence's end.
std::string passage_of(std::string_view text, std::size_t length, std::mt19937_64& rng) {
    const std::size_t last_start = text.size() > 2 * length ? text.size() - 2 * length : 0;
    std::size_t begin = std::uniform_int_distribution<std::size_t>(0, last_start)(rng);
    if (const std::size_t stop = text.find(". ", begin); stop != std::string_view::npos) {
        begin = stop + 2;
    }
    std::size_t end = text.find(". ", std::min(text.size(), begin + length));
    end = end == std::string_view::npos ? text.size() : end + 1;
    return std::string(text.substr(begin, end - begin));
}

std::vector<WorkloadRequest> copy_edit(const PresetOptions& o, std::mt19937_64& rng) {
    // Answers that quote their prompt (an edit writes the passage out
    // again): prompt lookup's best case, for speculative decoding.
    const std::vector<EvalText>& texts = eval_texts();
    if (texts.empty()) {
        throw std::runtime_error("this build has no evaluation texts (resources/eval)");
    }
    std::vector<WorkloadRequest> out;
    double t = 0;
    for (int i = 0; i < o.requests; ++i) {
        const EvalText& doc =
            texts[std::uniform_int_distribution<std::size_t>(0, texts.size() - 1)(rng)];
        WorkloadRequest r;
        r.arrival_seconds = t;
        r.chat = true;
        r.text = "Write out this passage again word for word, correcting only its spelling:\n\n" +
                 passage_of(doc.text, 360, rng);
        r.max_tokens = o.max_tokens;
        out.push_back(std::move(r));
        t += exponential_gap(rng, o.rate);
    }
    return out;
}

std::vector<WorkloadRequest> rotating_docs(const PresetOptions& o, std::mt19937_64& rng) {
    // Questions over six documents taken in turn: a cache that holds fewer
    // than six evicts (LRU) the very document asked about next, so without
    // a second tier no repeat finds its document cached.
    const std::vector<EvalText>& texts = eval_texts();
    if (texts.empty()) {
        throw std::runtime_error("this build has no evaluation texts (resources/eval)");
    }
    constexpr std::size_t kDocuments = 6;
    // Each text is cut into as many parts as documents come from it, one
    // passage from each part, so no two documents share a prefix.
    const std::size_t parts = (kDocuments + texts.size() - 1) / texts.size();
    std::vector<std::string> documents;
    for (std::size_t d = 0; d < kDocuments; ++d) {
        const std::string_view text = texts[d % texts.size()].text;
        const std::size_t part = text.size() / parts;
        documents.push_back(passage_of(text.substr(d / texts.size() * part, part), 1200, rng));
    }
    std::vector<WorkloadRequest> out;
    double t = 0;
    for (int i = 0; i < o.requests; ++i) {
        WorkloadRequest r;
        r.arrival_seconds = t;
        r.chat = true;
        r.text = "Read this text.\n\n" + documents[static_cast<std::size_t>(i) % kDocuments] +
                 "\n\n" + std::string(pick(rng, kDocQuestions));
        r.max_tokens = o.max_tokens;
        out.push_back(std::move(r));
        t += exponential_gap(rng, o.rate);
    }
    return out;
}

std::vector<WorkloadRequest> poisson(const PresetOptions& o, std::mt19937_64& rng) {
    std::vector<WorkloadRequest> out;
    double t = 0;
    for (int i = 0; i < o.requests; ++i) {
        WorkloadRequest r;
        r.arrival_seconds = t;
        r.chat = true;
        r.text = "Tell me about " + std::string(pick(rng, kTopics)) + ".";
        r.max_tokens = std::uniform_int_distribution<int>(std::max(1, o.max_tokens / 4),
                                                          std::max(1, o.max_tokens))(rng);
        out.push_back(std::move(r));
        t += exponential_gap(rng, o.rate);
    }
    return out;
}

} // namespace

const std::vector<std::string>& workload_preset_names() {
    static const std::vector<std::string> names{"shared-prefix", "multi-turn", "long-doc",
                                                "poisson",       "mixed",      "copy-edit",
                                                "rotating-docs"};
    return names;
}

std::string workload_preset_help() {
    return "shared-prefix: one long system prompt, varied questions (prefix hits)\n"
           "multi-turn: chats that grow; each turn resends the conversation so far\n"
           "long-doc: questions over one long document (an evaluation text)\n"
           "poisson: independent short chats arriving at --rate per second\n"
           "mixed: the four above interleaved\n"
           "copy-edit: passages to write out again corrected (answers quote their prompts)\n"
           "rotating-docs: questions over six documents in turn (more than a small cache "
           "keeps: the offload tier's case)";
}

std::vector<WorkloadRequest> make_preset(std::string_view name, const PresetOptions& options) {
    std::mt19937_64 rng(options.seed);
    if (name == "shared-prefix") {
        return shared_prefix(options, rng);
    }
    if (name == "multi-turn") {
        return multi_turn(options, rng);
    }
    if (name == "long-doc") {
        return long_doc(options, rng);
    }
    if (name == "poisson") {
        return poisson(options, rng);
    }
    if (name == "copy-edit") {
        return copy_edit(options, rng);
    }
    if (name == "rotating-docs") {
        return rotating_docs(options, rng);
    }
    if (name == "mixed") {
        PresetOptions part = options;
        part.requests = std::max(1, options.requests / 4);
        std::vector<WorkloadRequest> all;
        using Maker = std::vector<WorkloadRequest> (*)(const PresetOptions&, std::mt19937_64&);
        const Maker makers[] = {&shared_prefix, &multi_turn, &long_doc, &poisson};
        for (const Maker make : makers) {
            std::vector<WorkloadRequest> some = make(part, rng);
            all.insert(all.end(), some.begin(), some.end());
        }
        std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
            return a.arrival_seconds < b.arrival_seconds;
        });
        all.resize(std::min(all.size(), static_cast<std::size_t>(std::max(1, options.requests))));
        return all;
    }
    std::string known;
    for (const std::string& n : workload_preset_names()) {
        known += (known.empty() ? "" : ", ") + n;
    }
    throw std::invalid_argument("unknown workload '" + std::string(name) + "': not a preset (" +
                                known + ") nor a .jsonl file");
}

std::vector<WorkloadRequest> parse_trace(std::string_view text, std::string_view source) {
    std::vector<WorkloadRequest> out;
    std::istringstream lines{std::string(text)};
    std::string line;
    int number = 0;
    const auto fail = [&](const std::string& why) {
        throw WorkloadError(std::string(source) + ":" + std::to_string(number) + ": " + why);
    };
    while (std::getline(lines, line)) {
        ++number;
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') {
            continue;
        }
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
            fail(std::string("not valid JSON (") + e.what() + ")");
        }
        if (!j.is_object()) {
            fail("expected a JSON object");
        }
        static const std::vector<std::string> known{
            "arrival", "prompt",     "prompt_ids",         "chat",
            "system",  "max_tokens", "temperature",        "top_k",
            "top_p",   "min_p",      "repetition_penalty", "seed"};
        for (const auto& [key, value] : j.items()) {
            if (std::find(known.begin(), known.end(), key) == known.end()) {
                fail("unknown key \"" + key + "\"");
            }
        }
        WorkloadRequest r;
        const auto number_of = [&](const char* key, double fallback) {
            if (!j.contains(key)) {
                return fallback;
            }
            if (!j[key].is_number()) {
                fail(std::string("\"") + key + "\" must be a number");
            }
            return j[key].get<double>();
        };
        r.arrival_seconds = number_of("arrival", 0);
        if (r.arrival_seconds < 0) {
            fail("\"arrival\" must not be negative");
        }
        const bool has_text = j.contains("prompt");
        const bool has_ids = j.contains("prompt_ids");
        if (has_text == has_ids) {
            fail("give exactly one of \"prompt\" (text) and \"prompt_ids\" (token ids)");
        }
        if (has_text) {
            if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty()) {
                fail("\"prompt\" must be a non-empty string");
            }
            r.text = j["prompt"].get<std::string>();
        } else {
            if (!j["prompt_ids"].is_array() || j["prompt_ids"].empty()) {
                fail("\"prompt_ids\" must be a non-empty array of token ids");
            }
            for (const auto& id : j["prompt_ids"]) {
                if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
                    id.get<std::int64_t>() > INT32_MAX) {
                    fail("\"prompt_ids\" holds something that is not a token id");
                }
                r.ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
            }
        }
        if (j.contains("chat")) {
            if (!j["chat"].is_boolean()) {
                fail("\"chat\" must be true or false");
            }
            r.chat = j["chat"].get<bool>();
            if (r.chat && has_ids) {
                fail("\"chat\" needs a text \"prompt\", not \"prompt_ids\"");
            }
        }
        if (j.contains("system")) {
            if (!j["system"].is_string()) {
                fail("\"system\" must be a string");
            }
            r.system = j["system"].get<std::string>();
        }
        const double max_tokens = number_of("max_tokens", 64);
        if (max_tokens < 1 || max_tokens > 1'000'000 ||
            max_tokens != static_cast<int>(max_tokens)) {
            fail("\"max_tokens\" must be a whole number from 1 to 1000000");
        }
        r.max_tokens = static_cast<int>(max_tokens);
        if (j.contains("temperature") || j.contains("top_k") || j.contains("top_p") ||
            j.contains("min_p") || j.contains("repetition_penalty") || j.contains("seed")) {
            sampling::SamplingParams p;
            p.temperature = static_cast<float>(number_of("temperature", p.temperature));
            p.top_k = static_cast<int>(number_of("top_k", p.top_k));
            p.top_p = static_cast<float>(number_of("top_p", p.top_p));
            p.min_p = static_cast<float>(number_of("min_p", p.min_p));
            p.repetition_penalty =
                static_cast<float>(number_of("repetition_penalty", p.repetition_penalty));
            p.seed = static_cast<std::uint64_t>(number_of("seed", 0));
            if (const std::string problem = p.problem(); !problem.empty()) {
                fail(problem);
            }
            r.sampling = p;
        }
        out.push_back(std::move(r));
    }
    if (out.empty()) {
        throw WorkloadError(std::string(source) + ": no requests in the trace");
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return a.arrival_seconds < b.arrival_seconds;
    });
    return out;
}

namespace {
// Larger workload files are refused with that said: a workload is read whole.
constexpr std::uintmax_t kMaxWorkloadFileBytes = std::uintmax_t{256} << 20;
} // namespace

std::vector<WorkloadRequest> load_trace(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw WorkloadError(path.string() + ": cannot be read");
    }
    // Read whole (sorted by arrival, tokenized up front): bounded, so a file
    // that is not a workload cannot take the machine's memory.
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxWorkloadFileBytes) {
        throw WorkloadError(path.string() + ": " + std::to_string(size >> 20) +
                            " MiB, more than the " + std::to_string(kMaxWorkloadFileBytes >> 20) +
                            " MiB a workload trace may be (it is read whole); for production "
                            "traces use kvscope simulate with a hash-id trace");
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse_trace(text.str(), path.string());
}

std::vector<WorkloadRequest> load_workload(std::string_view preset_or_path,
                                           const PresetOptions& options) {
    const auto& names = workload_preset_names();
    if (std::find(names.begin(), names.end(), preset_or_path) != names.end()) {
        return make_preset(preset_or_path, options);
    }
    const std::filesystem::path path{std::string(preset_or_path)};
    if (std::filesystem::exists(path)) {
        return load_trace(path);
    }
    return make_preset(preset_or_path, options); // throws with the list of presets
}

} // namespace kvscope::workload
