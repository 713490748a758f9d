#include "profiler/recorded_run.h"

#include "engine/gpu_devices.h"
#include "engine/kv/kv_format.h"
#include "engine/util/perf_counters.h"
#include "profiler/recording/run_metadata.h"

#include <algorithm>
#include <chrono>

namespace kvscope::profiler {

std::optional<GpuCapture> parse_gpu_capture(std::string_view name) {
    if (name == "auto") {
        return GpuCapture::automatic;
    }
    if (name == "on") {
        return GpuCapture::on;
    }
    if (name == "off") {
        return GpuCapture::off;
    }
    return std::nullopt;
}

namespace {

std::unique_ptr<CuptiTracer> start_capture(GpuCapture mode, GpuActivitySink& sink,
                                           const RecordedRun::Notice& notice) {
    if (mode == GpuCapture::off) {
        return nullptr;
    }
    CuptiTracer::Started started = CuptiTracer::start(sink);
    if (started.tracer) {
        notice("GPU capture: CUPTI (kernels, copies, memsets, memory); " +
                   started.tracer->nvtx_note(),
               RecordedRun::NoticeKind::info);
    } else if (mode == GpuCapture::on) {
        notice("GPU capture unavailable: " + started.unavailable_reason +
                   "; recording engine events and CPU op slices only",
               RecordedRun::NoticeKind::warning);
    } else {
        notice("GPU capture: off (" + started.unavailable_reason + ")",
               RecordedRun::NoticeKind::info);
    }
    return std::move(started.tracer);
}

} // namespace

RecordedRun::RecordedRun(session::RunConfig config, const RecordingOptions& recording,
                         const std::vector<events::EventSink*>& sinks, Notice notice,
                         StepHook* step_hook)
    : notice_(std::move(notice))
    , step_hook_(step_hook)
    , stop_on_write_error_(recording.stop_on_write_error)
    , model_file_(session::run_model_file(config)) {
    if (!notice_) {
        notice_ = [](const std::string&, NoticeKind) {
        };
    }
    // The recording opens before the model loads: a file in the way fails
    // at once, and the weights' upload is captured too.
    if (!recording.path.empty()) {
        recorder_ = std::make_unique<Recorder>(
            recording.path, run_metadata(config, model_file_, recording.recorded_by),
            recording.overwrite);
        recorder_->set_gpu_devices(query_gpu_devices().devices);
        tracer_ = start_capture(recording.gpu_capture, *recorder_, notice_);
        if (step_hook_ != nullptr && !step_hook_->metadata_key().empty()) {
            recorder_->set_metadata(step_hook_->metadata_key(), "yes");
        }
        // Steps record CPU time always; instructions and cycles where allowed.
        if (const std::string why = perf_counters_unavailable_reason(); why.empty()) {
            notice_("Hardware counters: instructions and cycles per step", NoticeKind::info);
        } else {
            notice_("Hardware counters: not counted (" + why + "); steps record CPU time",
                    NoticeKind::info);
        }
    }
    for (events::EventSink* sink : sinks) {
        tee_.add(sink);
    }
    tee_.add(recorder_.get());
    config.model_path = model_file_.string();
    session_ = std::make_unique<session::ServingSession>(config, tee_.empty() ? nullptr : &tee_);
    if (recorder_) {
        add_session_metadata(*recorder_, *session_);
    }
}

RecordedRun::~RecordedRun() {
    session_.reset(); // its engine holds the tee
    if (tracer_) {
        tracer_->stop();
    }
}

ServedRun RecordedRun::serve(const ServeOptions& options) {
    const auto stop_asked = [&] {
        return options.stop_requested && options.stop_requested();
    };
    bool write_failed = false;
    session::ServingSession::ServeOptions serve;
    serve.stop_requested = [&] {
        if (recorder_ && !write_failed && recorder_->failed()) {
            write_failed = true;
            notice_("error: " + recorder_->error() + "; " +
                        (stop_on_write_error_ ? "stopping the run" : "the run goes on unrecorded"),
                    NoticeKind::write_failed);
        }
        return stop_asked() || (stop_on_write_error_ && write_failed) ||
               (step_hook_ != nullptr && step_hook_->let_go());
    };
    if (step_hook_ != nullptr) {
        serve.before_step = [this] {
            step_hook_->before_step();
        };
    }
    int peak_used = 0;
    serve.on_step = [&](const sched::StepStats& step) {
        if (step_hook_ != nullptr) {
            step_hook_->after_step();
        }
        peak_used = std::max(peak_used, session_->engine().kv().stats().used);
        if (options.on_step) {
            options.on_step(step);
        }
    };
    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::int64_t> ids = session_->serve(serve);
    ServedRun served;
    served.let_go = step_hook_ != nullptr && step_hook_->let_go();
    served.interrupted = stop_asked() || served.let_go;
    if (step_hook_ != nullptr) { // the gate hands the other build its turns while this one saves
        step_hook_->finish(!served.interrupted && !(stop_on_write_error_ && write_failed));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    const model::LlamaConfig& shape = session_->model().config();
    const runner::Backend& backend = session_->backend();
    served.summary = session::summarize_run(
        session_->engine(), ids, session_->config().workload, seconds, peak_used,
        kv::kv_bytes_per_token(backend.cache_format(), shape.layers, shape.kv_heads, shape.head_dim,
                               backend.block_size()),
        &session_->model().tokenizer());
    if (recorder_) {
        if (tracer_) {
            tracer_->stop(); // hands the last GPU records over before the file closes
        }
        recorder_->set_metadata("summary", served.summary.to_json(false));
        recorder_->set_metadata("complete", served.interrupted ? "interrupted" : "yes");
        try {
            recorder_->close();
        } catch (const RecordingError& error) {
            served.write_error = error.what();
        }
        served.written = recorder_->stats();
    }
    return served;
}

} // namespace kvscope::profiler
