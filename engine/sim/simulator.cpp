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
#include <mutex>
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

SimulationResult simulate(MooncakeTrace& trace, const SimulationConfig& config,
                          events::EventSink* sink, const SimulationProgress& progress) {
    if (config.num_blocks <= 0 || config.block_size <= 0) {
        throw std::invalid_argument("a simulation needs a cache of one block or more");
    }
    const std::int64_t wall_start = host_now_ns();
    SimClock clock;
    SimulatedBackend backend(config.num_blocks, config.block_size, config.bytes_per_block,
                             config.cost, clock);
    sched::EngineConfig engine_config;
    engine_config.scheduler = config.scheduler;
    engine_config.prefix_caching = config.prefix_caching;
    engine_config.clock = [&clock] {
        return clock.now_ns;
    };
    std::optional<SimClockSink> stamped;
    if (sink != nullptr) {
        stamped.emplace(clock, *sink);
    }
    sched::LlmEngine engine(backend, engine_config, stamped ? &*stamped : nullptr);

    SimulationResult result;
    std::vector<double> ttft;
    std::vector<double> tpot;
    std::vector<double> queue;
    // Requests not ended, with their trace arrival (the engine sees them a
    // step later at most: the clock moves a step at a time).
    std::unordered_map<std::int64_t, std::int64_t> arrival_of;
    const auto arrival_ns = [](const TraceRequest& r) {
        return static_cast<std::int64_t>(std::llround(r.arrival_s * 1e9));
    };
    const auto sum_up = [&](const sched::Request& r, std::int64_t arrived) {
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
            ttft.push_back(static_cast<double>(r.first_token_ns - arrived) * 1e-9);
            if (r.generated > 1) {
                tpot.push_back(static_cast<double>(r.finish_ns - r.first_token_ns) * 1e-9 /
                               (r.generated - 1));
            }
        }
        if (r.admitted_ns >= 0) {
            queue.push_back(static_cast<double>(r.admitted_ns - arrived) * 1e-9);
        }
    };

    std::optional<TraceRequest> pending = trace.next();
    const auto more = [&] {
        return pending.has_value() &&
               (config.max_requests <= 0 || result.requests < config.max_requests);
    };
    // Requests that have arrived but wait outside the engine, in arrival
    // order: an overloaded replay queues thousands, and as the engine's own
    // requests each would hold its whole prompt. The engine admits first
    // come, first served, so feeding it a bounded queue changes nothing it
    // decides - only the memory, now bounded by what runs. A recorded replay
    // hands every request over as it arrives, so the recording's arrivals
    // are the trace's.
    std::deque<TraceRequest> arrived;
    const std::size_t engine_queue =
        sink != nullptr ? std::numeric_limits<std::size_t>::max()
                        : static_cast<std::size_t>(std::max(64, 2 * config.scheduler.max_num_seqs));
    bool stopped = false;
    while (!stopped && (more() || !arrived.empty() || engine.has_unfinished())) {
        if (!engine.has_unfinished() && arrived.empty()) {
            clock.now_ns = std::max(clock.now_ns, arrival_ns(*pending)); // idle: jump
        }
        while (more() && arrival_ns(*pending) <= clock.now_ns) {
            arrived.push_back(std::move(*pending));
            ++result.requests;
            if (progress && result.requests % 256 == 0 && !progress(result.requests)) {
                stopped = true;
            }
            pending = trace.next();
        }
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
            arrival_of.emplace(id, arrival_ns(next));
            arrived.pop_front();
        }
        if (engine.has_unfinished()) {
            engine.step();
            ++result.steps;
        }
        for (auto it = arrival_of.begin(); it != arrival_of.end();) {
            const sched::Request& r = engine.request(it->first);
            if (!r.is_done()) {
                ++it;
                continue;
            }
            sum_up(r, it->second);
            engine.forget(it->first);
            it = arrival_of.erase(it);
        }
    }
    result.ttft_s = percentiles(ttft);
    result.tpot_s = percentiles(tpot);
    result.queue_s = percentiles(queue);
    result.simulated_s = static_cast<double>(clock.now_ns) * 1e-9;
    result.work = backend.total_work();
    result.trace_warnings = trace.warning_count();
    result.wall_s = static_cast<double>(host_now_ns() - wall_start) * 1e-9;
    return result;
}

std::vector<SimulationResult> simulate_each(const std::string& path,
                                            const std::vector<SimulationConfig>& configs,
                                            const std::function<void(std::size_t)>& done,
                                            unsigned threads) {
    std::vector<SimulationResult> results(configs.size());
    std::vector<std::exception_ptr> errors(configs.size());
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> finished{0};
    std::mutex report;
    const auto work = [&] {
        for (std::size_t i = next++; i < configs.size(); i = next++) {
            try {
                MooncakeTrace trace(path);
                results[i] = simulate(trace, configs[i]);
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
