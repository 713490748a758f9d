// What full capture costs decoding, A/B in one run: the same batch decoded
// with nothing listening (A) and with everything a recording takes (B: every
// engine event into a Recorder on its own thread, per-op CPU slices, NVTX
// ranges). Rounds alternate A and B so drift on a shared machine hits both;
// the table gives each round and the medians. Target: B within 3% of A.
//
//   kvscope-bench-capture [--rounds N] [--batch B] [--prompt P] [--decode D]
//                         [--threads T] [--model FILE] [--dir DIR]
#include "engine/model/llama_model.h"
#include "engine/model_path.h"
#include "engine/sched/llm_engine.h"
#include "engine/session/backend_factory.h"
#include "profiler/recording/recorder.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace kvscope;

namespace {

struct Options {
    int rounds = 6;
    int batch = 8;
    int prompt = 64;
    int decode = 48;
    int threads = 0;
    std::string model;
    std::filesystem::path dir = std::filesystem::temp_directory_path();
};

// Prefills `batch` random prompts, then returns the decode-only steps'
// throughput in tokens per second.
double run(runner::Backend& backend, const Options& o, int seed, events::EventSink* sink,
           bool record_ops) {
    sched::EngineConfig config;
    config.prefix_caching = false; // every round computes the same work
    config.record_ops = record_ops;
    sched::LlmEngine engine(backend, config, sink);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::uniform_int_distribution<std::int32_t> token(100, 40000);
    for (int b = 0; b < o.batch; ++b) {
        sched::RequestSpec spec;
        for (int t = 0; t < o.prompt; ++t) {
            spec.prompt.push_back(token(rng));
        }
        spec.max_tokens = o.decode;
        spec.ignore_eos = true;
        engine.add_request(std::move(spec));
    }
    double decode_seconds = 0;
    std::int64_t decode_tokens = 0;
    while (engine.has_unfinished()) {
        const sched::StepStats s = engine.step();
        if (s.prefill_tokens == 0 && s.decode_tokens == o.batch) {
            decode_seconds += s.seconds;
            decode_tokens += s.decode_tokens;
        }
    }
    return decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; i += 2) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "%s needs a value\n", flag.c_str());
            return 2;
        }
        const char* value = argv[i + 1];
        if (flag == "--rounds") {
            o.rounds = std::stoi(value);
        } else if (flag == "--batch") {
            o.batch = std::stoi(value);
        } else if (flag == "--prompt") {
            o.prompt = std::stoi(value);
        } else if (flag == "--decode") {
            o.decode = std::stoi(value);
        } else if (flag == "--threads") {
            o.threads = std::stoi(value);
        } else if (flag == "--model") {
            o.model = value;
        } else if (flag == "--dir") {
            o.dir = value;
        } else {
            std::fprintf(stderr,
                         "usage: %s [--rounds N] [--batch B] [--prompt P] [--decode D] "
                         "[--threads T] [--model FILE] [--dir DIR]\n",
                         argv[0]);
            return 2;
        }
    }
    ModelPath path = o.model.empty() ? resolve_model_path() : ModelPath{o.model, false};
    if (const std::string problem = model_path_problem(path); !problem.empty()) {
        std::fprintf(stderr, "%s\n", problem.c_str());
        return 1;
    }
    const std::shared_ptr<const model::LlamaModel> model = model::LlamaModel::load(path.path);
    session::BackendSpec spec;
    spec.kind = session::BackendKind::cpu;
    spec.threads = o.threads;
    session::KvCacheSpec cache;
    cache.num_blocks = o.batch * ((o.prompt + o.decode) / cache.block_size + 2);
    const std::unique_ptr<runner::Backend> made = session::make_backend(spec, model, cache);
    runner::Backend& backend = *made;
    const std::filesystem::path file = o.dir / "kvscope-bench-capture.sqlite";

    std::vector<double> off;
    std::vector<double> on;
    std::printf("| round | capture off (tok/s) | full capture (tok/s) | on/off |\n");
    std::printf("| ---: | ---: | ---: | ---: |\n");
    run(backend, o, 0, nullptr, false); // warm caches and the thread pool
    for (int r = 0; r < o.rounds; ++r) {
        // Alternate which goes first, so neither always runs on a warmer machine.
        double a = 0;
        double b = 0;
        for (int half = 0; half < 2; ++half) {
            if ((half == 0) == (r % 2 == 0)) {
                a = run(backend, o, r + 1, nullptr, false);
            } else {
                profiler::Recorder recorder(file, {{"bench", "capture overhead"}}, true);
                b = run(backend, o, r + 1, &recorder, true);
                recorder.close();
            }
        }
        off.push_back(a);
        on.push_back(b);
        std::printf("| %d | %.1f | %.1f | %.3f |\n", r + 1, a, b, b / a);
        std::fflush(stdout);
    }
    std::filesystem::remove(file);
    std::vector<double> ratios;
    for (std::size_t r = 0; r < off.size(); ++r) {
        ratios.push_back(on[r] / off[r]);
    }
    const double m_off = median(off);
    const double m_on = median(on);
    // The headline is the median of the per-round ratios: each round's A and
    // B ran back to back, so the pair shares the machine's mood of the moment.
    const double paired = median(ratios);
    std::printf("| median | %.1f | %.1f | %.3f (of the rounds' ratios) |\n", m_off, m_on, paired);
    std::printf("\ndecode: %d sequences, %d-token prompts, %d tokens each; full capture costs "
                "%.1f%% of decode throughput (median of paired rounds; %.1f%% from the medians "
                "of each column); target: at most 3%%\n",
                o.batch, o.prompt, o.decode, 100.0 * (1.0 - paired), 100.0 * (1.0 - m_on / m_off));
    return 0;
}
