#include "engine/sim/simulator.h"

#include "engine/sched/llm_engine.h"
#include "engine/session/run_summary.h"
#include "engine/sim/simulated_backend.h"
#include "engine/util/host_clock.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kvscope::sim {
namespace {

// Hands events on stamped with the simulated clock (offset by a second: a
// recording's times are never 0).
class SimClockSink final : public events::EventSink {
public:
    SimClockSink(const SimClock& clock, events::EventSink& next)
        : clock_(clock)
        , next_(next) {}
    void on_event(const events::EngineEvent& event) override {
        events::EngineEvent stamped = event;
        stamped.time_ns = clock_.now_ns + kOffsetNs;
        // Arrivals are handed over between steps, up to a step after the
        // trace's time: the recording says when they arrived.
        if (event.kind == events::EventKind::request_arrived && arrival_ns_ >= 0) {
            stamped.time_ns = arrival_ns_ + kOffsetNs;
        }
        next_.on_event(stamped);
    }
    // The trace's arrival time of the request added next (-1: the clock's).
    void set_arrival(std::int64_t arrival_ns) { arrival_ns_ = arrival_ns; }
    static constexpr std::int64_t kOffsetNs = 1'000'000'000;

private:
    const SimClock& clock_;
    events::EventSink& next_;
    std::int64_t arrival_ns_ = -1;
};

Percentiles percentiles(const std::vector<double>& values) {
    Percentiles out;
    if (values.empty()) {
        return out;
    }
    out.p50 = session::percentile(values, 0.5);
    out.p90 = session::percentile(values, 0.9);
    out.p99 = session::percentile(values, 0.99);
    double sum = 0;
    for (const double v : values) {
        sum += v;
    }
    out.mean = sum / static_cast<double>(values.size());
    return out;
}

double ratio(double part, double whole) {
    return whole > 0 ? part / whole : 0.0;
}

std::int64_t arrival_ns(const TraceRequest& r) {
    return static_cast<std::int64_t>(std::llround(r.arrival_s * 1e9));
}

// One engine of the replay: its clock, backend, engine, and the requests it
// was sent that have not ended.
struct Node {
    Node(const SimulationConfig& config, events::EventSink* sink)
        : backend(config.num_blocks, config.block_size, config.bytes_per_block, config.cost, clock)
        , engine(backend, engine_config(config, clock),
                 sink != nullptr ? &stamped.emplace(clock, *sink) : nullptr) {}

    static sched::EngineConfig engine_config(const SimulationConfig& config, SimClock& clock) {
        sched::EngineConfig c;
        c.scheduler = config.scheduler;
        c.prefix_caching = config.prefix_caching;
        c.cache_policy = config.cache_policy;
        c.report_ended = true;
        c.clock = [&clock] {
            return clock.now_ns;
        };
        return c;
    }

    bool busy() const { return engine.has_unfinished() || !arrived.empty(); }

    // Requests that have arrived but wait outside the engine, in arrival
    // order: an overloaded replay queues thousands, and as the engine's own
    // requests each would hold its whole prompt. The engine admits first
    // come, first served, so feeding it a bounded queue changes nothing it
    // decides - only the memory, now bounded by what runs. A recorded replay
    // hands every request over as it arrives, so the recording's arrivals
    // are the trace's.
    void feed(std::size_t engine_queue) {
        while (!arrived.empty() && engine.scheduler().waiting_count() < engine_queue) {
            const TraceRequest& next = arrived.front();
            sched::RequestSpec spec;
            spec.prompt = trace_prompt_tokens(next, SimulatedBackend::kVocab);
            spec.max_tokens = std::max(1, next.output_tokens);
            spec.ignore_eos = true;
            spec.arrival_seconds = next.arrival_s;
            if (stamped) {
                stamped->set_arrival(arrival_ns(next));
            }
            const std::int64_t id = engine.add_request(std::move(spec));
            live.emplace(
                id, Live{.arrival_ns = arrival_ns(next), .prompt_blocks = prompt_blocks(next)});
            arrived.pop_front();
        }
    }

    std::int64_t prompt_blocks(const TraceRequest& r) const {
        const std::int64_t size = backend.block_size();
        return (r.input_tokens + size - 1) / size;
    }

    // After a step: takes admitted requests off the queued load, sums up
    // and forgets ended ones.
    void collect(const std::vector<std::int64_t>& admitted) {
        const auto leave_queue = [this](Live& request) {
            if (!request.admitted) {
                request.admitted = true;
                queued_blocks -= request.prompt_blocks;
            }
        };
        for (const std::int64_t id : admitted) {
            leave_queue(live.at(id));
        }
        for (const std::int64_t id : engine.take_ended()) {
            const auto it = live.find(id);
            leave_queue(it->second);
            sum_up(engine.request(id), it->second.arrival_ns);
            engine.forget(id);
            live.erase(it);
        }
    }

    void sum_up(const sched::Request& r, std::int64_t arrived_ns) {
        if (r.state == sched::RequestState::rejected) {
            ++result.rejected;
            return;
        }
        ++result.finished;
        result.preemptions += r.accounting.preemptions;
        result.prompt_tokens += r.prompt_length();
        result.hit_tokens += r.accounting.prefix_hit_tokens;
        result.blocks_hit += r.accounting.blocks_hit;
        result.blocks_missed += r.accounting.blocks_missed;
        result.request_hit_sum += ratio(static_cast<double>(r.accounting.prefix_hit_tokens),
                                        static_cast<double>(r.prompt_length()));
        if (r.first_token_ns >= 0) {
            ttft.push_back(static_cast<double>(r.first_token_ns - arrived_ns) * 1e-9);
            if (r.generated > 1) {
                tpot.push_back(static_cast<double>(r.finish_ns - r.first_token_ns) * 1e-9 /
                               (r.generated - 1));
            }
        }
        if (r.admitted_ns >= 0) {
            queue.push_back(static_cast<double>(r.admitted_ns - arrived_ns) * 1e-9);
        }
    }

    void finish() {
        result.ttft_s = percentiles(ttft);
        result.tpot_s = percentiles(tpot);
        result.queue_s = percentiles(queue);
        result.simulated_s = static_cast<double>(clock.now_ns) * 1e-9;
        result.work = backend.total_work();
    }

    struct Live {
        std::int64_t arrival_ns = 0; // the trace's (the engine sees it up to a step later)
        std::int64_t prompt_blocks = 0;
        bool admitted = false;
    };

    SimClock clock;
    std::optional<SimClockSink> stamped;
    SimulatedBackend backend;
    sched::LlmEngine engine;
    std::deque<TraceRequest> arrived;
    std::unordered_map<std::int64_t, Live> live;
    std::int64_t queued_blocks = 0; // prompt blocks sent here, not yet admitted
    SimulationResult result;
    std::vector<double> ttft;
    std::vector<double> tpot;
    std::vector<double> queue;
};

// The cluster's figures: every node's counts summed, percentiles over all
// requests.
SimulationResult merged(const std::vector<std::unique_ptr<Node>>& nodes) {
    SimulationResult all;
    std::vector<double> ttft;
    std::vector<double> tpot;
    std::vector<double> queue;
    for (const auto& node : nodes) {
        const SimulationResult& r = node->result;
        all.requests += r.requests;
        all.finished += r.finished;
        all.rejected += r.rejected;
        all.preemptions += r.preemptions;
        all.prompt_tokens += r.prompt_tokens;
        all.hit_tokens += r.hit_tokens;
        all.blocks_hit += r.blocks_hit;
        all.blocks_missed += r.blocks_missed;
        all.request_hit_sum += r.request_hit_sum;
        all.simulated_s = std::max(all.simulated_s, r.simulated_s);
        all.steps += r.steps;
        all.work.prefill_tokens += r.work.prefill_tokens;
        all.work.decode_sequences += r.work.decode_sequences;
        all.work.kv_tokens_read += r.work.kv_tokens_read;
        ttft.insert(ttft.end(), node->ttft.begin(), node->ttft.end());
        tpot.insert(tpot.end(), node->tpot.begin(), node->tpot.end());
        queue.insert(queue.end(), node->queue.begin(), node->queue.end());
    }
    all.ttft_s = percentiles(ttft);
    all.tpot_s = percentiles(tpot);
    all.queue_s = percentiles(queue);
    if (nodes.size() > 1) {
        for (const auto& node : nodes) {
            all.nodes.push_back(node->result);
        }
    }
    return all;
}

} // namespace

double SimulationResult::hit_ratio_blocks() const {
    return ratio(static_cast<double>(blocks_hit), static_cast<double>(blocks_hit + blocks_missed));
}
double SimulationResult::hit_ratio_tokens() const {
    return ratio(static_cast<double>(hit_tokens), static_cast<double>(prompt_tokens));
}
double SimulationResult::hit_ratio_request_mean() const {
    return ratio(request_hit_sum, static_cast<double>(finished));
}

SimulationResult simulate(TraceReader& trace, const SimulationConfig& config,
                          events::EventSink* sink, const SimulationProgress& progress) {
    if (config.num_blocks <= 0 || config.block_size <= 0) {
        throw std::invalid_argument("a simulation needs a cache of one block or more");
    }
    if (config.nodes < 1) {
        throw std::invalid_argument("a simulation needs one node or more");
    }
    if (sink != nullptr && config.nodes != 1) {
        throw std::invalid_argument("a recording holds one engine: record one node, not " +
                                    std::to_string(config.nodes));
    }
    const std::int64_t wall_start = host_now_ns();
    std::vector<std::unique_ptr<Node>> nodes;
    for (int n = 0; n < config.nodes; ++n) {
        nodes.push_back(std::make_unique<Node>(config, sink));
    }
    const std::size_t engine_queue =
        sink != nullptr ? std::numeric_limits<std::size_t>::max()
                        : static_cast<std::size_t>(std::max(64, 2 * config.scheduler.max_num_seqs));

    std::int64_t requests = 0;
    std::optional<TraceRequest> pending = trace.next();
    const auto more = [&] {
        return pending.has_value() && (config.max_requests <= 0 || requests < config.max_requests);
    };
    std::vector<NodeView> views(nodes.size());
    bool stopped = false;
    int steps_since_asked = 0;
    while (!stopped) {
        // Step the busy node furthest behind until every busy node has
        // passed the next arrival, then route that arrival.
        Node* behind = nullptr;
        for (const auto& node : nodes) {
            if (node->busy() && (behind == nullptr || node->clock.now_ns < behind->clock.now_ns)) {
                behind = node.get();
            }
        }
        const bool arrivals = more();
        if (behind != nullptr && (!arrivals || behind->clock.now_ns < arrival_ns(*pending))) {
            // Asked now and then while stepping too: an overloaded replay
            // spends most of its time draining its backlog after the last
            // arrival.
            if (progress && ++steps_since_asked >= 1024) {
                steps_since_asked = 0;
                if (!progress(requests)) {
                    break;
                }
            }
            behind->feed(engine_queue);
            sched::StepStats stats;
            if (behind->engine.has_unfinished()) {
                stats = behind->engine.step();
                ++behind->result.steps;
            }
            behind->collect(stats.admitted);
            continue;
        }
        if (!arrivals) {
            break;
        }
        std::size_t target = static_cast<std::size_t>(requests % config.nodes);
        if (config.router == RouterKind::cache_aware && nodes.size() > 1) {
            const std::vector<std::int32_t> prompt =
                trace_prompt_tokens(*pending, SimulatedBackend::kVocab);
            for (std::size_t n = 0; n < nodes.size(); ++n) {
                const Node& node = *nodes[n];
                views[n].cached_prefix_blocks = node.engine.kv().match_prefix(prompt).blocks_hit;
                views[n].load_blocks = node.engine.kv().stats().used + node.queued_blocks;
                views[n].requests = node.result.requests;
            }
            target = cache_aware_node(nodes.front()->prompt_blocks(*pending), views);
        }
        Node& node = *nodes[target];
        if (!node.busy()) {
            node.clock.now_ns = std::max(node.clock.now_ns, arrival_ns(*pending)); // idle: jump
        }
        node.queued_blocks += node.prompt_blocks(*pending);
        ++node.result.requests;
        node.arrived.push_back(std::move(*pending));
        ++requests;
        if (progress && requests % 256 == 0 && !progress(requests)) {
            stopped = true;
        }
        pending = trace.next();
    }
    for (const auto& node : nodes) {
        node->finish();
    }
    SimulationResult result = merged(nodes);
    result.trace_warnings = trace.warning_count();
    result.wall_s = static_cast<double>(host_now_ns() - wall_start) * 1e-9;
    return result;
}

std::vector<std::int64_t> halving_capacities(std::int64_t top) {
    std::vector<std::int64_t> capacities;
    for (int k = 9; k >= 0; --k) {
        capacities.push_back(std::max<std::int64_t>(1, top >> k));
    }
    capacities.erase(std::unique(capacities.begin(), capacities.end()), capacities.end());
    return capacities;
}

SimulationConfig deployment_config(int block_size) {
    SimulationConfig config;
    config.block_size = block_size;
    config.bytes_per_block = kDeploymentBytesPerToken * block_size;
    config.scheduler.max_num_seqs = kDeploymentMaxSeqs;
    config.scheduler.max_num_batched_tokens = kDeploymentMaxBatchedTokens;
    config.cost = CostModel::llama3_8b_h100_estimate();
    return config;
}

std::vector<SimulationConfig> sweep_configs(const SimulationConfig& base,
                                            std::vector<std::int64_t> capacities,
                                            const std::vector<kv::CachePolicy>& policies,
                                            bool halving) {
    if (halving && capacities.size() == 1) {
        capacities = halving_capacities(capacities.front());
    }
    std::vector<SimulationConfig> configs;
    for (const kv::CachePolicy policy : policies) {
        for (const std::int64_t blocks : capacities) {
            SimulationConfig config = base;
            config.num_blocks = static_cast<int>(blocks);
            config.cache_policy = policy;
            configs.push_back(config);
        }
    }
    return configs;
}

std::string config_json(const SimulationConfig& config) {
    return nlohmann::json{{"block_size", config.block_size},
                          {"capacity_blocks", config.num_blocks},
                          {"bytes_per_block", config.bytes_per_block},
                          {"prefix_caching", config.prefix_caching},
                          {"cache_policy", kv::cache_policy_name(config.cache_policy)},
                          {"nodes", config.nodes},
                          {"router", router_name(config.router)},
                          {"max_num_seqs", config.scheduler.max_num_seqs},
                          {"max_num_batched_tokens", config.scheduler.max_num_batched_tokens},
                          {"chunked_prefill", config.scheduler.chunked_prefill},
                          {"preemption_victim", sched::victim_policy_name(config.scheduler.victim)},
                          {"max_requests", config.max_requests},
                          {"cost_model", nlohmann::json::parse(config.cost.to_json())}}
        .dump();
}

std::vector<SimulationResult> simulate_each(const TraceOpener& open_trace,
                                            const std::vector<SimulationConfig>& configs,
                                            const std::function<void(std::size_t)>& done,
                                            unsigned threads, const std::atomic<bool>* cancel) {
    std::vector<SimulationResult> results(configs.size());
    std::vector<std::exception_ptr> errors(configs.size());
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> finished{0};
    std::mutex report;
    const auto work = [&] {
        for (std::size_t i = next++; i < configs.size(); i = next++) {
            try {
                if (cancel != nullptr && cancel->load()) {
                    continue;
                }
                const std::unique_ptr<TraceReader> trace = open_trace();
                results[i] = simulate(*trace, configs[i], nullptr, [cancel](std::int64_t) {
                    return cancel == nullptr || !cancel->load();
                });
            } catch (...) {
                errors[i] = std::current_exception();
            }
            const std::size_t count = ++finished;
            if (done) {
                const std::lock_guard lock(report);
                done(count);
            }
        }
    };
    if (threads == 0) {
        threads = std::max(1u, std::thread::hardware_concurrency());
    }
    threads = std::min<unsigned>(threads,
                                 static_cast<unsigned>(std::max<std::size_t>(configs.size(), 1)));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) {
        pool.emplace_back(work);
    }
    work();
    for (std::thread& thread : pool) {
        thread.join();
    }
    for (const std::exception_ptr& error : errors) {
        if (error) {
            std::rethrow_exception(error);
        }
    }
    return results;
}

} // namespace kvscope::sim
