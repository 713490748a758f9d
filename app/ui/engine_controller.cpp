#include "app/ui/engine_controller.h"

#include "engine/cpu/cpu_backend.h"
#include "engine/events/tee_sink.h"
#include "engine/model/llama_model.h"
#include "engine/model_path.h"
#include "engine/sched/llm_engine.h"
#include "engine/workload/run_workload.h"
#include "kvscope/build_info.h"
#include "profiler/machine_info.h"
#include "profiler/recorder.h"

#include <chrono>

namespace kvscope::ui {

EngineController::EngineController(QObject* parent)
    : QObject(parent)
    , queue_(std::make_shared<profiler::LiveEventQueue>()) {}

EngineController::~EngineController() {
    stop();
    join();
}

std::shared_ptr<profiler::LiveEventQueue> EngineController::events() const {
    const std::lock_guard lock(queue_mutex_);
    return queue_;
}

void EngineController::join() {
    if (thread_.joinable()) {
        thread_.join();
    }
}

bool EngineController::start(const RunSettings& settings) {
    if (running_.load()) {
        return false;
    }
    join(); // the last run's thread has ended; reap it
    if (const std::string problem = settings.problem(); !problem.empty()) {
        emit failed(QString::fromStdString(problem));
        return false;
    }
    stop_ = false;
    paused_ = false;
    auto queue = std::make_shared<profiler::LiveEventQueue>();
    {
        const std::lock_guard lock(queue_mutex_);
        queue_ = queue;
    }
    running_ = true;
    emit started();
    thread_ = std::thread([this, settings, queue] { run(settings, queue); });
    return true;
}

void EngineController::set_paused(bool paused) {
    {
        const std::lock_guard lock(pause_mutex_);
        paused_ = paused;
    }
    resume_.notify_all();
    if (running_.load()) {
        emit status(paused ? tr("Paused") : tr("Running"));
    }
}

void EngineController::stop() {
    {
        const std::lock_guard lock(pause_mutex_);
        stop_ = true;
        paused_ = false;
    }
    resume_.notify_all();
}

void EngineController::wait_while_paused() {
    std::unique_lock lock(pause_mutex_);
    resume_.wait(lock, [this] { return !paused_.load() || stop_.load(); });
}

// Signals emitted here are queued to the window's thread (the controller
// lives there), so nothing below touches a widget.
void EngineController::run(RunSettings settings, std::shared_ptr<profiler::LiveEventQueue> queue) {
    try {
        ModelPath model_path = resolve_model_path();
        if (!settings.model_path.empty()) {
            model_path = {settings.model_path, false};
        }
        if (const std::string problem = model_path_problem(model_path); !problem.empty()) {
            throw std::runtime_error(problem);
        }
        // The recording opens first: a file in the way fails before the wait.
        std::unique_ptr<profiler::Recorder> recorder;
        if (!settings.record_path.empty()) {
            std::map<std::string, std::string> metadata = profiler::machine_info();
            metadata["kvscope_version"] = build_info::version;
            metadata["model_path"] = model_path.path.string();
            metadata["workload"] = settings.workload;
            metadata["recorded_by"] = "kvscope-ui";
            // Never over an existing file: it may be the run to compare with.
            recorder = std::make_unique<profiler::Recorder>(settings.record_path, metadata, false);
        }
        emit loading(true);
        emit status(tr("Loading %1 …").arg(QString::fromStdString(model_path.path.string())));
        std::shared_ptr<const model::LlamaModel> model;
        try {
            model = model::LlamaModel::load(model_path.path);
        } catch (...) {
            emit loading(false);
            throw;
        }
        emit loading(false);

        workload::PresetOptions preset;
        preset.seed = settings.seed;
        preset.requests = settings.requests;
        preset.rate = settings.rate;
        preset.max_tokens = settings.max_tokens;
        const std::vector<workload::WorkloadRequest> requests =
            workload::load_workload(settings.workload, preset);
        sampling::SamplingParams sampling;
        sampling.temperature = settings.temperature;
        std::vector<sched::RequestSpec> specs =
            workload::to_request_specs(requests, model->tokenizer(), sampling);
        for (std::size_t i = 0; i < specs.size(); ++i) {
            if (!requests[i].sampling) {
                specs[i].sampling.seed = settings.seed * 1'000'003 + i; // as `kvscope run`
            }
        }

        cpu::CpuBackendOptions options;
        options.block_size = settings.block_size;
        options.num_blocks = settings.cache_blocks;
        if (settings.cache_bytes > 0) {
            const model::LlamaConfig& c = model->config();
            const double block_bytes =
                kv::kv_bytes_per_token(settings.cache_format, c.layers, c.kv_heads, c.head_dim,
                                       settings.block_size) *
                settings.block_size;
            options.num_blocks =
                static_cast<int>(static_cast<double>(settings.cache_bytes) / block_bytes);
            if (options.num_blocks < 2) {
                throw std::runtime_error(
                    "a KV cache of " + std::to_string(settings.cache_bytes) +
                    " bytes holds fewer than 2 blocks of this model; give it more");
            }
        }
        options.threads = settings.threads;
        options.cache_format = settings.cache_format;
        cpu::CpuBackend backend(model, options);

        events::TeeSink tee;
        tee.add(queue.get());
        tee.add(recorder.get());
        sched::EngineConfig config;
        config.scheduler = settings.scheduler;
        config.prefix_caching = settings.prefix_caching;
        config.eviction = settings.eviction;
        config.record_ops = true; // the timeline's CPU ops
        const tokenizer::Tokenizer& tok = model->tokenizer();
        config.ends_generation = [&tok](std::int32_t id) {
            return tok.ends_generation(id);
        };
        config.token_piece = [&tok](std::int32_t id) {
            return tok.token_bytes(id, true);
        };
        sched::LlmEngine engine(backend, config, &tee);
        if (recorder) {
            const model::LlamaConfig& c = model->config();
            recorder->set_metadata("model_name", c.name.empty() ? c.architecture : c.name);
            recorder->set_metadata("requests", std::to_string(specs.size()));
            recorder->set_metadata("backend", backend.name());
            recorder->set_metadata("run_config", engine.describe_config());
        }
        emit status(tr("Running: %1").arg(QString::fromStdString(settings.describe())));

        const auto start = std::chrono::steady_clock::now();
        const int total = static_cast<int>(specs.size());
        workload::DriveOptions drive;
        drive.real_time = true;
        drive.stop_requested = [this] {
            return stop_.load();
        };
        drive.on_step = [&](const sched::StepStats& step) {
            if (step.step % 8 == 0) {
                int done = 0;
                for (const std::int64_t id : engine.request_ids()) {
                    done += engine.request(id).is_done() ? 1 : 0;
                }
                emit progress(done, total);
            }
            wait_while_paused();
        };
        workload::drive(engine, specs, drive);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        int done = 0;
        for (const std::int64_t id : engine.request_ids()) {
            done += engine.request(id).state == sched::RequestState::finished ? 1 : 0;
        }
        emit progress(total, total);
        if (recorder) {
            recorder->close();
        }
        QString summary = stop_.load() ? tr("Stopped after %1 s: %2 of %3 requests finished")
                                       : tr("Done in %1 s: %2 of %3 requests finished");
        summary = summary.arg(seconds, 0, 'f', 1).arg(done).arg(total);
        if (!settings.record_path.empty()) {
            summary += tr("; recorded to %1").arg(QString::fromStdString(settings.record_path));
        }
        running_ = false;
        emit finished(summary);
    } catch (const std::exception& e) {
        running_ = false;
        emit failed(QString::fromUtf8(e.what()));
    }
}

} // namespace kvscope::ui
