#include "profiler/recorded_attach.h"

#include "engine/util/json_text.h"
#include "profiler/recording/recording.h"
#include "profiler/recording/run_metadata.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>

namespace kvscope::profiler {

RecordedAttach::RecordedAttach(const attach::AttachTargets& targets,
                               const AttachRecording& recording,
                               const std::vector<events::EventSink*>& sinks) {
    attach::AttachOptions options = attach::attach_options(targets);
    endpoints_ = attach::source_endpoints(options);
    if (!recording.path.empty()) {
        recorder_ = std::make_unique<Recorder>(
            recording.path,
            attach_metadata(endpoints_, recording.recorded_by, recording.tokenizer_path),
            recording.overwrite);
    }
    for (events::EventSink* sink : sinks) {
        tee_.add(sink);
    }
    tee_.add(recorder_.get());
    try {
        session_ = std::make_unique<attach::AttachSession>(std::move(options), &tee_);
    } catch (const std::invalid_argument& error) {
        // A usage error: no recording of an attach that never began.
        if (recorder_) {
            recorder_.reset();
            std::error_code ignored;
            std::filesystem::remove(recording.path, ignored);
        }
        throw std::invalid_argument(std::string(error.what()) +
                                    " (endpoints look like tcp://HOST:PORT or HOST:PORT)");
    }
}

RecordedAttach::~RecordedAttach() {
    session_.reset(); // it holds the tee
}

void RecordedAttach::end() {
    if (!ended_) {
        ended_ = true;
        session_->emit_status();
    }
}

RecordedAttach::Closed RecordedAttach::close(double seconds) {
    end();
    Closed closed;
    if (!recorder_) {
        return closed;
    }
    try {
        recorder_->set_metadata("summary", json_text(attach_summary_json(*session_, seconds)));
        recorder_->set_metadata("complete", "yes");
        recorder_->close();
    } catch (const RecordingError& error) {
        closed.write_error = error.what();
    }
    closed.written = recorder_->stats();
    return closed;
}

nlohmann::json metrics_summary_json(const attach::MetricsSummary& m) {
    nlohmann::json j = nlohmann::json::object();
    const auto put = [&](const char* key, const auto& value) {
        if (value) {
            j[key] = *value;
        }
    };
    put("kv_usage", m.kv_usage);
    put("prefix_cache_queries", m.prefix_queries);
    put("prefix_cache_hits", m.prefix_hits);
    put("prefix_cache_hit_rate", m.prefix_hit_rate);
    put("prefix_cache_hit_rate_since_attach", m.prefix_hit_rate_since);
    put("preemptions", m.preemptions);
    put("num_gpu_blocks", m.num_gpu_blocks);
    put("block_size", m.block_size);
    return j;
}

nlohmann::json attach_summary_json(const attach::AttachSession& session, double seconds) {
    nlohmann::json sources = nlohmann::json::array();
    for (const auto& [id, s] : session.state().sources()) {
        nlohmann::json tiers = nlohmann::json::array();
        for (const auto& [key, tier] : s.blocks.tiers()) {
            const std::vector<attach::PrefixTree> trees = s.blocks.trees(key);
            tiers.push_back({{"rank", key.rank},
                             {"medium", key.medium},
                             {"resident_blocks", tier.blocks.size()},
                             {"prefix_trees", trees.size()},
                             {"largest_tree_blocks", trees.empty() ? 0 : trees.front().blocks}});
        }
        const attach::ResidencyCounts& c = s.blocks.counts();
        sources.push_back({{"source", id},
                           {"endpoints", nlohmann::json::parse(s.info.endpoints, nullptr, false)},
                           {"stream", nlohmann::json::parse(s.status.counts, nullptr, false)},
                           {"silent_ms", s.status.silent_ms},
                           {"blocks_stored", c.stored},
                           {"blocks_removed", c.removed},
                           {"removed_not_resident", c.unknown_removed},
                           {"cleared", c.clears},
                           {"restarts", c.resets},
                           {"capacity_blocks", s.capacity_blocks()},
                           {"metrics", metrics_summary_json(attach::summarize_metrics(s.metrics))},
                           {"tiers", tiers}});
    }
    return {{"seconds", seconds}, {"sources", sources}};
}

} // namespace kvscope::profiler
