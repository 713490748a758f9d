#include "app/ui/run/attach_controller.h"

#include "app/ui/workers/free_on_worker.h"
#include "app/ui/workers/thread_handoff.h"
#include "profiler/attach/attach_session.h"
#include "profiler/recorded_attach.h"
#include "profiler/recording/recording.h"
#include "profiler/store/run_store.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace kvscope::ui {
namespace {

// About a second of eight busy publishers' rows (a few hundred bytes each);
// the window applies them a slice per frame, and what it cannot keep up
// with waits in the publishers' queues, then is dropped there, counted.
constexpr std::size_t kMaxPendingEvents = 250'000;

// How often the window gets a copy of the attach's state: every
// kSnapshotInterval, or kSnapshotCostFactor times what the last copy took
// (160,000 resident blocks take tens of milliseconds to copy), so copies
// keep to a small share of the attach thread.
constexpr std::chrono::milliseconds kSnapshotInterval{200};
constexpr int kSnapshotCostFactor = 10;
// Snapshots the window has not taken: the newest matter, older ones go.
constexpr std::size_t kMaxSnapshotsWaiting = 2;

std::vector<std::string> to_std(const QStringList& list) {
    std::vector<std::string> out;
    for (const QString& item : list) {
        out.push_back(item.trimmed().toStdString());
    }
    return out;
}

} // namespace

QStringList AttachSettings::lines() const {
    QStringList out;
    const auto metrics = [this](qsizetype source) {
        return source < metrics_urls.size() ? metrics_urls[source] : QString();
    };
    for (qsizetype i = 0; i < endpoints.size(); ++i) {
        QStringList words{endpoints[i]};
        if (i < replays.size() && !replays[i].isEmpty()) {
            words << replays[i];
        }
        if (!metrics(i).isEmpty()) {
            words << metrics(i);
        }
        out << words.join(' ');
    }
    for (qsizetype i = 0; i < trtllm_urls.size(); ++i) {
        QStringList words{QStringLiteral("trtllm"), trtllm_urls[i]};
        if (!metrics(endpoints.size() + i).isEmpty()) {
            words << metrics(endpoints.size() + i);
        }
        out << words.join(' ');
    }
    return out;
}

QString AttachSettings::from_lines(const QStringList& lines, AttachSettings& out) {
    out.endpoints.clear();
    out.replays.clear();
    out.trtllm_urls.clear();
    out.metrics_urls.clear();
    QStringList trtllm_metrics; // after the endpoints' in the end
    int with_replay = 0;
    int with_metrics = 0;
    int line_number = 0;
    for (const QString& line : lines) {
        ++line_number;
        QStringList words = line.simplified().split(' ', Qt::SkipEmptyParts);
        if (words.isEmpty()) {
            continue;
        }
        QString metrics;
        for (qsizetype w = 0; w < words.size(); ++w) {
            if (words[w].startsWith("http://") || words[w].startsWith("https://")) {
                if (!metrics.isEmpty()) {
                    return QObject::tr("line %1: give one metrics URL per publisher")
                        .arg(line_number);
                }
                metrics = words.takeAt(w--);
            }
        }
        with_metrics += metrics.isEmpty() ? 0 : 1;
        if (!words.isEmpty() && words[0] == QStringLiteral("trtllm")) {
            if (words.size() != 2) {
                return QObject::tr("line %1: give a TensorRT-LLM server as \"trtllm HOST:PORT\"")
                    .arg(line_number);
            }
            out.trtllm_urls << words[1];
            trtllm_metrics << metrics;
            continue;
        }
        if (words.isEmpty() || words.size() > 2) {
            return QObject::tr("line %1: give an endpoint, optionally its replay endpoint, and "
                               "optionally its metrics URL (\"HOST:5557 HOST:5558 "
                               "http://HOST:8000/metrics\")")
                .arg(line_number);
        }
        out.endpoints << words[0];
        out.replays << (words.size() == 2 ? words[1] : QString());
        out.metrics_urls << metrics;
        with_replay += words.size() == 2 ? 1 : 0;
    }
    out.metrics_urls << trtllm_metrics;
    if (out.endpoints.isEmpty() && out.trtllm_urls.isEmpty()) {
        return QObject::tr("give at least one publisher's endpoint");
    }
    if (with_replay == 0) {
        out.replays.clear();
    } else if (with_replay != out.endpoints.size()) {
        return QObject::tr("give every publisher a replay endpoint, or none");
    }
    if (with_metrics == 0) {
        out.metrics_urls.clear();
    } else if (with_metrics != out.metrics_urls.size()) {
        return QObject::tr("give every publisher a metrics URL, or none");
    }
    return {};
}

AttachController::AttachController(QObject* parent)
    : LiveSource(parent) {}

AttachController::~AttachController() {
    stop_and_wait();
}

std::vector<AttachController::StateSnapshot> AttachController::take_snapshots() {
    const std::lock_guard lock(snapshots_mutex_);
    return std::exchange(snapshots_, {});
}

std::shared_ptr<profiler::RunStore> AttachController::new_store() const {
    auto store = std::make_shared<profiler::RunStore>();
    store->attached().follow_snapshots();
    return store;
}

void AttachController::feed(profiler::RunStore& store) {
    // Each is shown once the rows before it are in (they are queued before
    // it is taken, so they come in this drain or a later one).
    for (StateSnapshot& snapshot : take_snapshots()) {
        store.attached().add_snapshot(snapshot.rows, std::move(snapshot.state));
    }
}

bool AttachController::start(const AttachSettings& settings) {
    if (running()) {
        return false;
    }
    {
        const std::lock_guard lock(snapshots_mutex_);
        snapshots_.clear();
    }
    return launch([this, settings](const std::stop_token& stop,
                                   const std::shared_ptr<profiler::LiveEventQueue>& queue) {
        run(settings, stop, *queue);
    });
}

// Runs on the controller's worker thread; its signals are emitted on the
// window's thread, where the controller lives (thread_handoff.h).
void AttachController::run(const AttachSettings& settings, const std::stop_token& stop,
                           profiler::LiveEventQueue& queue) {
    try {
        attach::AttachTargets targets;
        targets.endpoints = to_std(settings.endpoints);
        targets.replays = to_std(settings.replays);
        targets.topic = settings.topic.toStdString();
        targets.trtllm_urls = to_std(settings.trtllm_urls);
        targets.metrics_urls = to_std(settings.metrics_urls);
        targets.block_size = settings.block_size;
        targets.num_blocks = settings.num_blocks;
        // Never over an existing file: it may be the recording to compare with.
        profiler::AttachRecording recording;
        recording.path = settings.record_path.toStdString();
        recording.overwrite = false;
        recording.recorded_by = "kvscope-ui";
        recording.tokenizer_path = settings.tokenizer_path.toStdString();
        profiler::RecordedAttach attached(targets, recording,
                                          std::vector<events::EventSink*>{&queue});
        attach::AttachSession& session = attached.session();
        emit_on_own_thread(
            this, &LiveSource::status,
            tr("Attached to %1").arg((settings.endpoints + settings.trtllm_urls).join(", ")));

        const auto start = std::chrono::steady_clock::now();
        auto next_status = start + std::chrono::seconds(1);
        auto next_snapshot = start;
        std::int64_t snapshot_rows = -1; // rows emitted at the last snapshot
        const auto snapshot = [&] {
            const auto begin = std::chrono::steady_clock::now();
            // Freed on a worker too: the window's thread drops them.
            StateSnapshot copy{static_cast<std::uint64_t>(session.events_emitted()),
                               make_shared_freed_on_worker(session.state())};
            snapshot_rows = session.events_emitted();
            const auto end = std::chrono::steady_clock::now();
            next_snapshot = end + std::max<std::chrono::steady_clock::duration>(
                                      kSnapshotInterval, kSnapshotCostFactor * (end - begin));
            StateSnapshot evicted; // freed after unlocking: the window waits on this lock
            const std::lock_guard lock(snapshots_mutex_);
            if (snapshots_.size() >= kMaxSnapshotsWaiting) {
                evicted = std::move(snapshots_.front());
                snapshots_.erase(snapshots_.begin());
            }
            snapshots_.push_back(std::move(copy));
        };
        bool behind = false;
        while (!stop.stop_requested()) {
            // A window far behind (a modal dialog, a slow frame) is not fed
            // more: the sockets are left unread, so the publishers' ZeroMQ
            // high-water marks drop for us and the gaps are replayed or
            // counted lost. Memory stays bounded and no engine waits.
            behind = queue.pending() > kMaxPendingEvents;
            if (behind) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            } else {
                session.poll(std::chrono::milliseconds(50));
            }
            const auto now = std::chrono::steady_clock::now();
            if (!behind && now >= next_snapshot && session.events_emitted() != snapshot_rows) {
                snapshot();
            }
            if (now < next_status) {
                continue;
            }
            next_status = now + std::chrono::seconds(1);
            const attach::AttachProgress progress = session.progress(now);
            QString text = tr("Attached: %1 events from %2 publisher(s), %3 lost")
                               .arg(progress.events)
                               .arg(session.sources().size())
                               .arg(progress.lost);
            if (progress.silent_s > 5) {
                text +=
                    tr("; a publisher has been silent for %1 s").arg(progress.silent_s, 0, 'f', 0);
            }
            if (!progress.failing_metrics.empty()) { // said, never fatal: as the CLI says it
                text += tr("; metrics %1 failing: %2")
                            .arg(QString::fromStdString(progress.failing_metrics),
                                 QString::fromStdString(progress.failing_metrics_error));
            }
            if (behind) {
                text += tr("; the window is behind, events wait in the publishers' queues");
            }
            emit_on_own_thread(this, &LiveSource::status, text);
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        attached.end(); // the last status rows
        snapshot();     // the final state, status rows included, before the file closes
        const profiler::RecordedAttach::Closed closed = attached.close(seconds);
        if (!closed.write_error.empty()) {
            throw profiler::RecordingError(closed.write_error);
        }
        QString summary = tr("Detached after %1 s: %2 events")
                              .arg(seconds, 0, 'f', 1)
                              .arg(session.progress().events);
        if (!settings.record_path.isEmpty()) {
            summary += tr("; recorded to %1").arg(settings.record_path);
        }
        report_finished(summary);
    } catch (const std::exception& e) {
        report_failed(QString::fromUtf8(e.what()));
    }
}

} // namespace kvscope::ui
