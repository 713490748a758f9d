#include "app/ui/run/attach_controller.h"

#include "engine/events/tee_sink.h"
#include "profiler/attach/attach_session.h"
#include "profiler/recorder.h"
#include "profiler/run_metadata.h"

#include <chrono>

namespace kvscope::ui {
namespace {

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
    for (qsizetype i = 0; i < endpoints.size(); ++i) {
        out << (i < replays.size() ? endpoints[i] + " " + replays[i] : endpoints[i]);
    }
    return out;
}

QString AttachSettings::from_lines(const QStringList& lines, AttachSettings& out) {
    out.endpoints.clear();
    out.replays.clear();
    int with_replay = 0;
    int line_number = 0;
    for (const QString& line : lines) {
        ++line_number;
        const QStringList words = line.simplified().split(' ', Qt::SkipEmptyParts);
        if (words.isEmpty()) {
            continue;
        }
        if (words.size() > 2) {
            return QObject::tr("line %1: give an endpoint and, optionally, its replay endpoint "
                               "(\"HOST:5557 HOST:5558\")")
                .arg(line_number);
        }
        out.endpoints << words[0];
        out.replays << (words.size() == 2 ? words[1] : QString());
        with_replay += words.size() == 2 ? 1 : 0;
    }
    if (out.endpoints.isEmpty()) {
        return QObject::tr("give at least one publisher's endpoint");
    }
    if (with_replay == 0) {
        out.replays.clear();
    } else if (with_replay != out.endpoints.size()) {
        return QObject::tr("give every publisher a replay endpoint, or none");
    }
    return {};
}

AttachController::AttachController(QObject* parent)
    : QObject(parent)
    , queue_(std::make_shared<profiler::LiveEventQueue>()) {}

AttachController::~AttachController() {
    stop();
    join();
}

std::shared_ptr<profiler::LiveEventQueue> AttachController::events() const {
    const std::lock_guard lock(queue_mutex_);
    return queue_;
}

void AttachController::join() {
    if (thread_.joinable()) {
        thread_.join();
    }
}

bool AttachController::start(const AttachSettings& settings) {
    if (running_.load()) {
        return false;
    }
    join();
    stop_ = false;
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

void AttachController::stop() {
    stop_ = true;
}

// Signals emitted here are queued to the window's thread.
void AttachController::run(AttachSettings settings,
                           std::shared_ptr<profiler::LiveEventQueue> queue) {
    try {
        attach::AttachOptions options;
        options.block_size = settings.block_size;
        options.num_blocks = settings.num_blocks;
        if (const std::string problem =
                attach::add_sources(to_std(settings.endpoints), to_std(settings.replays),
                                    settings.topic.toStdString(), options);
            !problem.empty()) {
            throw std::invalid_argument(problem);
        }
        std::vector<std::string> endpoints;
        for (const attach::KvEventSourceOptions& source : options.sources) {
            endpoints.push_back(source.endpoint);
        }
        // Never over an existing file: it may be the recording to compare with.
        std::unique_ptr<profiler::Recorder> recorder;
        if (!settings.record_path.isEmpty()) {
            recorder = std::make_unique<profiler::Recorder>(
                settings.record_path.toStdString(),
                profiler::attach_metadata(endpoints, "kvscope-ui",
                                          settings.tokenizer_path.toStdString()),
                false);
        }
        events::TeeSink tee;
        tee.add(queue.get());
        tee.add(recorder.get());
        attach::AttachSession session(options, &tee);
        emit status(tr("Attached to %1").arg(settings.endpoints.join(", ")));

        const auto start = std::chrono::steady_clock::now();
        auto next_status = start + std::chrono::seconds(1);
        while (!stop_.load()) {
            session.poll(std::chrono::milliseconds(50));
            const auto now = std::chrono::steady_clock::now();
            if (now < next_status) {
                continue;
            }
            next_status = now + std::chrono::seconds(1);
            qint64 events = 0;
            qint64 lost = 0;
            double silent = 0;
            for (const auto& source : session.sources()) {
                events += source->counts().events;
                lost += source->counts().lost;
                silent = std::max(silent, source->silent_for(now).count());
            }
            QString text = tr("Attached: %1 events from %2 publisher(s), %3 lost")
                               .arg(events)
                               .arg(session.sources().size())
                               .arg(lost);
            if (silent > 5) {
                text += tr("; a publisher has been silent for %1 s").arg(silent, 0, 'f', 0);
            }
            emit status(text);
        }
        session.emit_status();
        qint64 events = 0;
        for (const auto& source : session.sources()) {
            events += source->counts().events;
        }
        if (recorder) {
            recorder->set_metadata("complete", "yes");
            recorder->close();
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        QString summary = tr("Detached after %1 s: %2 events").arg(seconds, 0, 'f', 1).arg(events);
        if (!settings.record_path.isEmpty()) {
            summary += tr("; recorded to %1").arg(settings.record_path);
        }
        running_ = false;
        emit finished(summary);
    } catch (const std::exception& e) {
        running_ = false;
        emit failed(QString::fromUtf8(e.what()));
    }
}

} // namespace kvscope::ui
