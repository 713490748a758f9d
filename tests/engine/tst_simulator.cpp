// kvscope simulate's core (engine/sim): Mooncake traces read line by line
// with FILE:LINE errors and warnings; prompts derived from the hash ids
// (equal ids, equal tokens); the replay's prefix-cache hits against an
// independent count from the ids alone, on one node and on a cluster's
// nodes behind either router; the cost-model clock against the
// model's own arithmetic; and the head of the real conversation trace
// (tests/engine/data/mooncake_conversation_head300.jsonl, the first 300
// lines of Mooncake's FAST25-release/traces/conversation_trace.jsonl,
// Apache-2.0) replayed whole.
#include "engine/sim/cost_model.h"
#include "engine/sim/hash_id_trace.h"
#include "engine/sim/kvscope_trace.h"
#include "engine/sim/simulated_backend.h"
#include "engine/sim/simulator.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using namespace kvscope::sim;

namespace {

std::string write_file(const QTemporaryDir& dir, const char* name, const std::string& text) {
    const std::string path = dir.filePath(name).toStdString();
    std::ofstream(path) << text;
    return path;
}

std::string line(double ms, int input, int output, const std::vector<std::int64_t>& ids) {
    std::string text = "{\"timestamp\": " + std::to_string(static_cast<long long>(ms)) +
                       ", \"input_length\": " + std::to_string(input) +
                       ", \"output_length\": " + std::to_string(output) + ", \"hash_ids\": [";
    for (std::size_t i = 0; i < ids.size(); ++i) {
        text += (i > 0 ? ", " : "") + std::to_string(ids[i]);
    }
    return text + "]}\n";
}

// Times in seconds: a test cost model whose arithmetic is easy to follow.
CostModel test_costs() {
    CostModel model;
    model.step_s = 0.01;
    model.prefill_token_s = 1e-4;
    model.decode_sequence_s = 2e-3;
    model.kv_token_read_s = 1e-6;
    model.source = "test";
    return model;
}

// A trace whose prompts continue earlier ones for a while (shared
// prefixes) and then go on with new ids; requests 1000 s apart, so each
// runs alone.
struct GeneratedTrace {
    std::string text;
    std::vector<std::vector<std::int64_t>> ids;
    std::vector<int> inputs;
};

GeneratedTrace shared_prefix_trace(std::uint32_t seed, int count) {
    std::mt19937 rng(seed);
    GeneratedTrace out;
    std::int64_t next_id = 1000;
    for (int i = 0; i < count; ++i) {
        const int blocks = 1 + static_cast<int>(rng() % 6);
        std::vector<std::int64_t> ids;
        if (!out.ids.empty() && rng() % 3 != 0) {
            const std::vector<std::int64_t>& base = out.ids[rng() % out.ids.size()];
            const std::size_t keep = std::min<std::size_t>(base.size() - 1, rng() % 5);
            ids.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(keep));
        }
        while (static_cast<int>(ids.size()) < blocks) {
            ids.push_back(next_id++);
        }
        // Full 512-token blocks but for a last block of 100..511 tokens.
        const int input =
            512 * (static_cast<int>(ids.size()) - 1) + 100 + static_cast<int>(rng() % 412);
        out.text += line(i * 1'000'000.0, input, 3, ids);
        out.ids.push_back(ids);
        out.inputs.push_back(input);
    }
    return out;
}

struct ExpectedHits {
    std::int64_t prompt_tokens = 0;
    std::int64_t hit_tokens = 0;
    std::int64_t blocks_hit = 0;
    std::int64_t blocks = 0;
    std::vector<std::int64_t> node_hit_tokens;
};

// What an unbounded cache on each node hits, from the ids alone: request i
// runs on node_of(i); its leading ids that node has cached, each with this
// prompt's tokens of it (a last block is partial: its first tokens equal an
// earlier full block's), in whole 16-token engine blocks, short of the last
// prompt token. A node caches each full id whole, and of a partial last id
// its whole engine blocks.
ExpectedHits count_hits(const GeneratedTrace& trace, std::size_t nodes,
                        const std::function<std::size_t(std::size_t)>& node_of) {
    ExpectedHits out;
    out.node_hit_tokens.assign(nodes, 0);
    std::vector<std::map<std::int64_t, std::int64_t>> cached(nodes); // id -> its tokens cached
    for (std::size_t i = 0; i < trace.ids.size(); ++i) {
        const std::vector<std::int64_t>& ids = trace.ids[i];
        const int input = trace.inputs[i];
        std::map<std::int64_t, std::int64_t>& node_cached = cached[node_of(i)];
        const auto tokens_of_block = [&](std::size_t k) -> std::int64_t {
            return k + 1 < ids.size() ? 512 : input - 512 * static_cast<int>(ids.size() - 1);
        };
        std::int64_t matched_tokens = 0;
        for (std::size_t k = 0; k < ids.size(); ++k) {
            const auto it = node_cached.find(ids[k]);
            const std::int64_t have = it == node_cached.end() ? 0 : it->second;
            matched_tokens += std::min(have, tokens_of_block(k));
            if (have < tokens_of_block(k)) {
                break;
            }
        }
        const std::int64_t hit = std::min<std::int64_t>(matched_tokens, input - 1) / 16 * 16;
        out.hit_tokens += hit;
        out.node_hit_tokens[node_of(i)] += hit;
        out.prompt_tokens += input;
        out.blocks_hit += hit / 16;
        out.blocks += (input + 15) / 16;
        for (std::size_t k = 0; k < ids.size(); ++k) {
            std::int64_t& have = node_cached[ids[k]];
            have = std::max(have, tokens_of_block(k) / 16 * 16);
        }
    }
    return out;
}

SimulationConfig config_with(int blocks) {
    SimulationConfig config;
    config.block_size = 16;
    config.num_blocks = blocks;
    config.bytes_per_block = 16 * 1024;
    config.scheduler.max_num_seqs = 64;
    config.scheduler.max_num_batched_tokens = 8192;
    config.cost = test_costs();
    return config;
}

} // namespace

class TestSimulator : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

private slots:
    void sweepsEachPolicyOverItsCapacities() {
        // The deployment both front ends replay against, and the order
        // their tables and plots read the results in: policy by policy.
        const SimulationConfig base = deployment_config(16);
        QCOMPARE(base.scheduler.max_num_seqs, 256);
        QCOMPARE(base.scheduler.max_num_batched_tokens, 8192);
        QCOMPARE(base.bytes_per_block, std::int64_t{131'072} * 16);
        const std::vector<kv::CachePolicy> policies = {kv::CachePolicy::lru, kv::CachePolicy::lfu};
        const std::vector<SimulationConfig> listed = sweep_configs(base, {100, 50}, policies, true);
        QCOMPARE(listed.size(), std::size_t{4}); // two capacities given: no halving
        QCOMPARE(listed[1].num_blocks, 50);
        QVERIFY(listed[1].cache_policy == kv::CachePolicy::lru);
        QVERIFY(listed[2].cache_policy == kv::CachePolicy::lfu);
        const std::vector<SimulationConfig> halved = sweep_configs(base, {4096}, policies, true);
        QCOMPARE(halved.size(), std::size_t{20});
        QCOMPARE(halved.front().num_blocks, 8); // 4096 >> 9, ascending
        QCOMPARE(halved[9].num_blocks, 4096);
        QVERIFY(halved[10].cache_policy == kv::CachePolicy::lfu);
        QCOMPARE(halved[10].num_blocks, 8);
        QCOMPARE(sweep_configs(base, {4096}, policies, false).size(), std::size_t{2});
    }

    void readsRequestsAndSaysWhereLinesAreWrong() {
        const std::string path =
            write_file(dir_, "good.jsonl",
                       line(0, 1000, 5, {1, 2}) + "\n" + line(500, 512, 1, {1}) +
                           line(400, 600, 2, {3, 4}) +     // earlier than the line before
                           line(900, 1030, 2, {5, 1, 6})); // id 1 at block 1
        HashIdTrace trace(path, kMooncakeFormat);
        std::vector<TraceRequest> requests;
        while (std::optional<TraceRequest> r = trace.next()) {
            requests.push_back(*r);
        }
        QCOMPARE(requests.size(), std::size_t{4});
        QCOMPARE(requests[0].input_tokens, 1000);
        QCOMPARE(requests[1].line, std::int64_t{3}); // the blank line counted
        QCOMPARE(requests[1].arrival_s, 0.5);
        QCOMPARE(requests[2].arrival_s, 0.5); // kept in file order, at the earlier time
        QCOMPARE(trace.warning_count(), std::int64_t{2});
        QVERIFY(trace.warnings()[0].find("good.jsonl:4: timestamp earlier") != std::string::npos);
        QVERIFY(trace.warnings()[1].find("good.jsonl:5: hash id 1 at block 1") !=
                std::string::npos);

        const std::vector<std::pair<std::string, std::string>> bad{
            {"not json", "not JSON"},
            {"[1, 2]", "not a JSON object"},
            {R"({"input_length": 10, "output_length": 1, "hash_ids": [1]})", "timestamp"},
            {R"({"timestamp": 0, "output_length": 1, "hash_ids": [1]})", "input_length"},
            {R"({"timestamp": 0, "input_length": 10, "hash_ids": [1]})", "output_length"},
            {R"({"timestamp": 0, "input_length": 10, "output_length": 1})", "hash_ids"},
            {R"({"timestamp": -5, "input_length": 10, "output_length": 1, "hash_ids": [1]})",
             "timestamp"},
            {R"({"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]})",
             "1 hash ids for 600 input tokens (2 blocks of 512)"},
            {R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ["a"]})",
             "not an integer"},
        };
        for (const auto& [text, why] : bad) {
            const std::string bad_path =
                write_file(dir_, "bad.jsonl", line(0, 10, 1, {7}) + text + "\n");
            HashIdTrace bad_trace(bad_path, kMooncakeFormat);
            QVERIFY(bad_trace.next().has_value());
            try {
                bad_trace.next();
                QFAIL(("accepted: " + text).c_str());
            } catch (const TraceError& e) {
                const std::string message = e.what();
                QVERIFY2(message.find("bad.jsonl:2: ") != std::string::npos, message.c_str());
                QVERIFY2(message.find(why) != std::string::npos, message.c_str());
            }
        }
        QVERIFY_THROWS_EXCEPTION(
            TraceError, HashIdTrace(dir_.filePath("missing").toStdString(), kMooncakeFormat));
    }

    // A line of 17 MiB (a gigabyte would do the same, only slower to write)
    // is refused with its FILE:LINE once 16 MiB are read, by the reader and
    // by format detection, instead of being read whole.
    void overlongLinesAreRefusedWithoutReadingThem() {
        const std::string path = write_file(dir_, "long.jsonl",
                                            line(0, 10, 1, {7}) + std::string(17 << 20, ' ') +
                                                "\n" + line(0, 10, 1, {8}));
        HashIdTrace trace(path, kMooncakeFormat);
        QVERIFY(trace.next().has_value());
        try {
            trace.next();
            QFAIL("read a 17 MiB line");
        } catch (const TraceError& e) {
            QVERIFY2(std::string(e.what()).find("long.jsonl:2: longer than 16 MiB") !=
                         std::string::npos,
                     e.what());
        }
        const std::string first = write_file(dir_, "first.jsonl", std::string(17 << 20, 'x'));
        try {
            detect_trace_format(first);
            QFAIL("detected a format in a 17 MiB line");
        } catch (const TraceError& e) {
            QVERIFY2(std::string(e.what()).find("first.jsonl:1: longer than 16 MiB") !=
                         std::string::npos,
                     e.what());
        }
    }

    void promptTokensFollowTheIds() {
        TraceRequest a;
        a.input_tokens = 1100;
        a.block_ids = {10, 11, 12};
        a.tokens_per_id = 512;
        TraceRequest b = a;
        b.input_tokens = 1030;
        b.block_ids = {10, 11, 99};
        const std::vector<std::int32_t> ta = trace_prompt_tokens(a, SimulatedBackend::kVocab);
        const std::vector<std::int32_t> tb = trace_prompt_tokens(b, SimulatedBackend::kVocab);
        QCOMPARE(ta.size(), std::size_t{1100});
        QCOMPARE(tb.size(), std::size_t{1030});
        QVERIFY(std::equal(ta.begin(), ta.begin() + 1024, tb.begin())); // ids 10 and 11
        QVERIFY(!std::equal(ta.begin() + 1024, ta.begin() + 1030, tb.begin() + 1024));
        std::set<std::int32_t> distinct(ta.begin(), ta.end());
        QVERIFY(distinct.size() > 1000); // not a constant fill
        for (const std::int32_t t : ta) {
            QVERIFY(t >= 0 && t < SimulatedBackend::kVocab);
        }
    }

    // Qwen-Bailian's traces: timestamps in seconds, an id per 16 tokens, the
    // chat fields read past; ids are per-block hashes, so an id met at
    // another position is no warning; a prompt's id list must cover it.
    void readsQwenBailianTraces() {
        const auto bailian = [](double s, int input, const std::string& ids) {
            return R"({"chat_id": 7, "parent_chat_id": -1, "timestamp": )" + std::to_string(s) +
                   R"(, "input_length": )" + std::to_string(input) +
                   R"(, "output_length": 4, "type": "text", "turn": 1, "hash_ids": )" + ids + "}\n";
        };
        // Request 2 shares request 1's first two blocks (32 tokens); request 3
        // has id 2 first (no shared prefix: a hit needs the chain).
        const std::string path =
            write_file(dir_, "bailian.jsonl",
                       bailian(10.5, 40, "[1, 2, 3]") + bailian(11.25, 50, "[1, 2, 4, 5]") +
                           bailian(12.0, 33, "[2, 1, 6]"));
        QCOMPARE(detect_trace_format(path), TraceFormat::qwen_bailian);
        const std::unique_ptr<TraceReader> trace = open_trace(path, TraceFormat::automatic);
        const std::optional<TraceRequest> first = trace->next();
        QCOMPARE(first->arrival_s, 0.0);
        QCOMPARE(first->tokens_per_id, 16);
        QCOMPARE(trace->next()->arrival_s, 0.75);
        QVERIFY(trace->next().has_value());
        QCOMPARE(trace->warning_count(), std::int64_t{0});

        const std::unique_ptr<TraceReader> replay = open_trace(path, TraceFormat::qwen_bailian);
        const SimulationResult r = simulate(*replay, config_with(1000));
        QCOMPARE(r.requests, std::int64_t{3});
        QCOMPARE(r.hit_tokens, std::int64_t{32});

        const std::string bad = write_file(dir_, "bailian_bad.jsonl", bailian(0, 40, "[1, 2]"));
        HashIdTrace short_ids(bad, kQwenBailianFormat);
        try {
            short_ids.next();
            QFAIL("accepted 2 ids for 40 tokens");
        } catch (const TraceError& e) {
            QVERIFY2(std::string(e.what()).find("bailian_bad.jsonl:1: 2 hash ids for 40 input "
                                                "tokens (3 blocks of 16)") != std::string::npos,
                     e.what());
        }
    }

    // kvscope's own traces: token ids replayed as given (prefix hits where
    // they share whole blocks); text without a tokenizer is an error that
    // says so; a file of no known format says what it lacks.
    void readsKvscopeTracesAndDetectsFormats() {
        std::string shared = "[";
        for (int t = 0; t < 40; ++t) {
            shared += std::to_string(100 + t) + ", ";
        }
        const std::string path = write_file(
            dir_, "kvscope.jsonl",
            "# two prompts sharing 40 tokens\n" + std::string(R"({"arrival": 0, "prompt_ids": )") +
                shared + R"(1, 2, 3], "max_tokens": 5})" + "\n" +
                R"({"arrival": 30, "prompt_ids": )" + shared + R"(7, 8], "max_tokens": 3})" + "\n");
        QCOMPARE(detect_trace_format(path), TraceFormat::kvscope);
        const std::unique_ptr<TraceReader> trace = open_trace(path, TraceFormat::automatic);
        const SimulationResult r = simulate(*trace, config_with(1000));
        QCOMPARE(r.requests, std::int64_t{2});
        QCOMPARE(r.prompt_tokens, std::int64_t{43 + 42});
        QCOMPARE(r.hit_tokens, std::int64_t{32}); // two whole 16-token blocks
        QCOMPARE(r.work.decode_sequences, 4LL + 2LL);

        const std::string text =
            write_file(dir_, "text.jsonl",
                       R"({"arrival": 0, "prompt": "Hello there", "max_tokens": 2})"
                       "\n");
        try {
            open_trace(text, TraceFormat::kvscope);
            QFAIL("text read without a tokenizer");
        } catch (const TraceError& e) {
            QVERIFY2(std::string(e.what()).find("tokenizer") != std::string::npos, e.what());
        }
        const std::string broken = write_file(dir_, "broken.jsonl",
                                              R"({"arrival": 0, "prompt_ids": "x"})"
                                              "\n");
        QVERIFY_THROWS_EXCEPTION(TraceError, open_trace(broken, TraceFormat::kvscope));
        const std::string other = write_file(dir_, "other.jsonl",
                                             R"({"id": 1})"
                                             "\n");
        try {
            detect_trace_format(other);
            QFAIL("an unknown format detected");
        } catch (const TraceError& e) {
            QVERIFY2(std::string(e.what()).find("other.jsonl:1: ") != std::string::npos &&
                         std::string(e.what()).find("--format") != std::string::npos,
                     e.what());
        }
        QCOMPARE(detect_trace_format(KVSCOPE_SOURCE_DIR
                                     "/tests/engine/data/mooncake_conversation_head300.jsonl"),
                 TraceFormat::mooncake);
        QCOMPARE(parse_trace_format("qwen-bailian"), std::optional(TraceFormat::qwen_bailian));
        QVERIFY(!parse_trace_format("csv"));
    }

    // Requests far apart (each ends before the next comes) with a cache that
    // never fills: each one's hit is its longest run of leading ids seen
    // before (a reused id may be a prompt's partial last block), in whole
    // engine blocks, short of its last token - counted here from the ids alone.
    void hitsMatchACountFromTheIds() {
        const GeneratedTrace generated = shared_prefix_trace(3, 40);
        const std::string path = write_file(dir_, "shared.jsonl", generated.text);
        const ExpectedHits expected = count_hits(generated, 1, [](std::size_t) { return 0; });
        HashIdTrace trace(path, kMooncakeFormat);
        const SimulationResult r = simulate(trace, config_with(100'000));
        QCOMPARE(r.requests, std::int64_t{40});
        QCOMPARE(r.finished, std::int64_t{40});
        QCOMPARE(r.prompt_tokens, expected.prompt_tokens);
        QVERIFY(expected.hit_tokens > 0);
        QCOMPARE(r.hit_tokens, expected.hit_tokens);
        QCOMPARE(r.blocks_hit, expected.blocks_hit);
        QCOMPARE(r.blocks_hit + r.blocks_missed, expected.blocks);
        QCOMPARE(r.hit_ratio_tokens(), static_cast<double>(expected.hit_tokens) /
                                           static_cast<double>(expected.prompt_tokens));
        QCOMPARE(r.preemptions, std::int64_t{0});
        QVERIFY(r.nodes.empty());

        // Without prefix caching nothing is hit.
        HashIdTrace again(path, kMooncakeFormat);
        SimulationConfig off = config_with(100'000);
        off.prefix_caching = false;
        QCOMPARE(simulate(again, off).hit_tokens, std::int64_t{0});
    }

    // Round-robin over three nodes: request i goes to node i mod 3, and each
    // node's hits are the count from the ids of its own requests alone; the
    // cluster's figures are the nodes' sums.
    void roundRobinNodesEachCacheTheirOwn() {
        const GeneratedTrace generated = shared_prefix_trace(5, 60);
        const std::string path = write_file(dir_, "cluster.jsonl", generated.text);
        const ExpectedHits expected = count_hits(generated, 3, [](std::size_t i) { return i % 3; });
        HashIdTrace trace(path, kMooncakeFormat);
        SimulationConfig config = config_with(100'000);
        config.nodes = 3;
        const SimulationResult r = simulate(trace, config);
        QCOMPARE(r.nodes.size(), std::size_t{3});
        QCOMPARE(r.requests, std::int64_t{60});
        QCOMPARE(r.hit_tokens, expected.hit_tokens);
        std::int64_t hit_sum = 0;
        for (std::size_t n = 0; n < 3; ++n) {
            QCOMPARE(r.nodes[n].requests, std::int64_t{20});
            QCOMPARE(r.nodes[n].hit_tokens, expected.node_hit_tokens[n]);
            hit_sum += r.nodes[n].hit_tokens;
        }
        QCOMPARE(hit_sum, r.hit_tokens);
        // Local caches lose the hits of prefixes first met on another node.
        const ExpectedHits one_cache = count_hits(generated, 1, [](std::size_t) { return 0; });
        QVERIFY(r.hit_tokens < one_cache.hit_tokens);

        // A recording holds one engine.
        HashIdTrace again(path, kMooncakeFormat);
        struct Nothing final : events::EventSink {
            void on_event(const events::EngineEvent&) override {}
        } sink;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, simulate(again, config, &sink));
    }

    // Requests far apart (every node idle at each arrival): the cache-aware
    // router sends each to a node holding its longest cached prefix, so the
    // cluster hits what one cache would; round-robin hits less.
    void cacheAwareRoutingFindsThePrefix() {
        const GeneratedTrace generated = shared_prefix_trace(7, 60);
        const std::string path = write_file(dir_, "routed.jsonl", generated.text);
        const ExpectedHits one_cache = count_hits(generated, 1, [](std::size_t) { return 0; });
        SimulationConfig config = config_with(100'000);
        config.nodes = 4;
        config.router = RouterKind::cache_aware;
        HashIdTrace trace(path, kMooncakeFormat);
        const SimulationResult aware = simulate(trace, config);
        QCOMPARE(aware.hit_tokens, one_cache.hit_tokens);
        config.router = RouterKind::round_robin;
        HashIdTrace again(path, kMooncakeFormat);
        QVERIFY(simulate(again, config).hit_tokens < aware.hit_tokens);
        // New prefixes spread: no node takes every request.
        for (const SimulationResult& node : aware.nodes) {
            QVERIFY(node.requests < 60);
        }
    }

    // Forty requests at once, one shared 2-block prefix, nothing cached yet:
    // the cache-aware router finds no prefix anywhere and equal loads in
    // turn, so they spread evenly (routed before any node steps: arrivals at
    // a node's time come first).
    void simultaneousRequestsSpreadOverNodes() {
        std::string text;
        for (int i = 0; i < 40; ++i) {
            text += line(0, 1500, 4, {1, 2, 100 + i});
        }
        const std::string path = write_file(dir_, "burst.jsonl", text);
        SimulationConfig config = config_with(100'000);
        config.nodes = 4;
        config.router = RouterKind::cache_aware;
        HashIdTrace trace(path, kMooncakeFormat);
        const SimulationResult r = simulate(trace, config);
        QCOMPARE(r.finished, std::int64_t{40});
        for (const SimulationResult& node : r.nodes) {
            QCOMPARE(node.requests, std::int64_t{10});
        }
    }

    // A stop asked for while the engines drain their backlog (fewer than
    // 256 requests, so after every arrival) ends the replay there.
    void stopsWhileDraining() {
        std::string text;
        for (int i = 0; i < 20; ++i) {
            text += line(0, 100, 3000, {500 + i});
        }
        const std::string path = write_file(dir_, "long.jsonl", text);
        HashIdTrace trace(path, kMooncakeFormat);
        int asked = 0;
        const SimulationResult stopped =
            simulate(trace, config_with(100'000), nullptr, [&asked](std::int64_t read) {
                ++asked;
                return read < 20; // every request read: stop
            });
        QCOMPARE(asked, 1);
        QCOMPARE(stopped.requests, std::int64_t{20});
        QCOMPARE(stopped.finished, std::int64_t{0}); // each needs 3,000 steps
        QVERIFY(stopped.steps <= 1024);
        HashIdTrace whole(path, kMooncakeFormat);
        QCOMPARE(simulate(whole, config_with(100'000)).finished, std::int64_t{20});
    }

    // The router's cost: blocks to compute there plus the node's load.
    void cacheAwareCostWeighsLoad() {
        const std::vector<NodeView> idle = {{.cached_prefix_blocks = 0, .load_blocks = 0},
                                            {.cached_prefix_blocks = 6, .load_blocks = 0}};
        QCOMPARE(cache_aware_node(10, idle), std::size_t{1});
        // The prefix's node is busy: 4 + 7 > 10 + 0, so recompute elsewhere.
        const std::vector<NodeView> busy = {{.cached_prefix_blocks = 0, .load_blocks = 0},
                                            {.cached_prefix_blocks = 6, .load_blocks = 7}};
        QCOMPARE(cache_aware_node(10, busy), std::size_t{0});
        // Equal cost: the lighter load; then fewer requests; then the lower index.
        const std::vector<NodeView> tie = {{.cached_prefix_blocks = 2, .load_blocks = 3},
                                           {.cached_prefix_blocks = 0, .load_blocks = 1},
                                           {.cached_prefix_blocks = 0, .load_blocks = 1}};
        QCOMPARE(cache_aware_node(10, tie), std::size_t{1});
        std::vector<NodeView> spread = tie;
        spread[1].requests = 5;
        spread[2].requests = 4;
        QCOMPARE(cache_aware_node(10, spread), std::size_t{2});
        QCOMPARE(parse_router("cache-aware"), std::optional(RouterKind::cache_aware));
        QVERIFY(!parse_router("random"));
    }

    // One request alone: its prefill is one step (the budget holds it), each
    // further token a decode step; the clock is the cost model's sum.
    void clockFollowsTheCostModel() {
        const std::string path = write_file(dir_, "one.jsonl", line(2000, 1000, 4, {1, 2}));
        HashIdTrace trace(path, kMooncakeFormat);
        const SimulationResult r = simulate(trace, config_with(1000));
        const CostModel c = test_costs();
        const double prefill = c.step_s + 1000 * c.prefill_token_s + 1000 * c.kv_token_read_s;
        double decode_total = 0;
        for (int context = 1001; context <= 1003; ++context) {
            decode_total += c.step_s + c.decode_sequence_s + context * c.kv_token_read_s;
        }
        QVERIFY(std::abs(r.ttft_s.p50 - prefill) < 1e-6);
        QVERIFY(std::abs(r.tpot_s.p50 - decode_total / 3) < 1e-6);
        QVERIFY(std::abs(r.queue_s.p50) < 1e-9); // admitted as it came
        // The clock starts at the first request (its timestamp, 2 s, is the trace's 0).
        QVERIFY(std::abs(r.simulated_s - (prefill + decode_total)) < 1e-6);
        QCOMPARE(r.steps, std::int64_t{4});
        QCOMPARE(r.work.prefill_tokens, 1000LL);
        QCOMPARE(r.work.decode_sequences, 3LL);
    }

    // A cache too small for a prompt rejects it, counted, and the replay goes
    // on; a cache that holds one request at a time makes the others wait.
    void smallCachesRejectAndQueue() {
        const std::string path =
            write_file(dir_, "tight.jsonl",
                       line(0, 5000, 2, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) +
                           line(0, 1000, 50, {20, 21}) + line(0, 1000, 50, {30, 31}));
        HashIdTrace trace(path, kMooncakeFormat);
        const SimulationResult r = simulate(trace, config_with(70)); // 1,120 tokens
        QCOMPARE(r.requests, std::int64_t{3});
        QCOMPARE(r.rejected, std::int64_t{1});
        QCOMPARE(r.finished, std::int64_t{2});
        QVERIFY(r.queue_s.p90 > 0.05); // the second waited for the first's blocks
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, [&] {
            HashIdTrace t(path, kMooncakeFormat);
            simulate(t, config_with(0));
        }());
    }

    void costModelFilesAreChecked() {
        const CostModel read = CostModel::from_json(
            R"({"step_s": 0.005, "prefill_token_s": 4e-5, "decode_sequence_s": 4e-5,
                "kv_token_read_s": 4e-8, "source": "an H100"})");
        QCOMPARE(read.step_s, 0.005);
        QCOMPARE(read.source, std::string("an H100"));
        QCOMPARE(CostModel::from_json(read.to_json()).kv_token_read_s, 4e-8);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, CostModel::from_json("{"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 CostModel::from_json(R"({"step_s": 1, "prefill_token_s": 1,
                                     "decode_sequence_s": -1, "kv_token_read_s": 0})"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, CostModel::from_json(R"({"step_s": 1})"));
    }

    // The real trace's first 300 requests, whole: every one ends, the ids
    // the conversations share give hits, and none are warned about.
    void conversationTraceHead() {
        HashIdTrace trace(KVSCOPE_SOURCE_DIR
                          "/tests/engine/data/mooncake_conversation_head300.jsonl",
                          kMooncakeFormat);
        SimulationConfig config = config_with(200'000);
        config.scheduler.max_num_seqs = 256;
        const SimulationResult r = simulate(trace, config);
        QCOMPARE(r.requests, std::int64_t{300});
        QCOMPARE(r.finished + r.rejected, std::int64_t{300});
        QCOMPARE(r.trace_warnings, std::int64_t{0});
        QVERIFY(r.hit_ratio_tokens() > 0.01);
        QVERIFY(r.hit_ratio_request_mean() >= r.hit_ratio_tokens() * 0.5);
        QVERIFY(r.ttft_s.p50 > 0);

        // Recorded, every request goes to the engine as it arrives; otherwise
        // at most a bounded queue of them waits inside it (memory). The
        // engine serves first come, first served: the same replay either way.
        struct Counting final : events::EventSink {
            std::int64_t events = 0;
            void on_event(const events::EngineEvent&) override { ++events; }
        } sink;
        HashIdTrace again(KVSCOPE_SOURCE_DIR
                          "/tests/engine/data/mooncake_conversation_head300.jsonl",
                          kMooncakeFormat);
        SimulationConfig tight = config;
        tight.scheduler.max_num_seqs = 8; // an engine queue of 64, far below the backlog
        HashIdTrace third(KVSCOPE_SOURCE_DIR
                          "/tests/engine/data/mooncake_conversation_head300.jsonl",
                          kMooncakeFormat);
        const SimulationResult bounded = simulate(third, tight);
        const SimulationResult recorded = simulate(again, tight, &sink);
        QVERIFY(sink.events > 0);
        QCOMPARE(recorded.hit_tokens, bounded.hit_tokens);
        QCOMPARE(recorded.preemptions, bounded.preemptions);
        QCOMPARE(recorded.steps, bounded.steps);
        QCOMPARE(recorded.ttft_s.p99, bounded.ttft_s.p99);
        QCOMPARE(recorded.queue_s.p50, bounded.queue_s.p50);
    }
};

QTEST_GUILESS_MAIN(TestSimulator)
#include "tst_simulator.moc"
