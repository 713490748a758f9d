// Attaches to serving engines on a thread of its own (the app's File >
// Attach to engine): an AttachSession polling every publisher, its events
// into a LiveEventQueue the window drains a frame at a time and, when asked,
// into a recording. Status comes back about once a second, the end as
// finished(summary), a failure as failed(reason); never a crash.
#pragma once

#include "profiler/store/live_event_queue.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <QObject>
#include <QString>
#include <QStringList>

namespace kvscope::attach {
class AttachedState;
}

namespace kvscope::ui {

struct AttachSettings {
    QStringList endpoints; // tcp://HOST:PORT or HOST:PORT, one per publisher
    QStringList replays;   // their replay endpoints in the same order, or none
    // TensorRT-LLM servers polled over HTTP (lines "trtllm HOST:PORT"),
    // numbered after the endpoints.
    QStringList trtllm_urls;
    // Every publisher's Prometheus /metrics URL (endpoints', then the
    // TensorRT-LLM servers'), or none.
    QStringList metrics_urls;
    QString topic;
    qint64 block_size = 0;  // 0: from the events
    qint64 num_blocks = 0;  // 0: not known
    QString record_path;    // empty: no recording
    QString tokenizer_path; // a GGUF whose tokenizer shows token ids as text; empty: none

    // One line per publisher, "ENDPOINT [REPLAY] [http://METRICS_URL]" or
    // "trtllm HOST:PORT [http://METRICS_URL]", as the dialog shows them.
    QStringList lines() const;
    // Parses lines() back (a word with an http:// or https:// scheme is the
    // metrics URL); the reason when a line is not that.
    static QString from_lines(const QStringList& lines, AttachSettings& out);
};

class AttachController : public QObject {
    Q_OBJECT
public:
    explicit AttachController(QObject* parent = nullptr);
    ~AttachController() override; // stops and waits for its thread

    // False when an attach is under way or the settings are refused (failed()
    // says why).
    bool start(const AttachSettings& settings);
    void stop(); // finished() follows
    bool running() const { return running_.load(); }
    std::shared_ptr<profiler::LiveEventQueue> events() const;

    // The attach's own state (built from the batches its rows come from),
    // copied every few hundred milliseconds while it changes (less often
    // when a copy takes long) and once at the end, with the number of rows
    // emitted before it: the window's store shows these
    // (RunStore::add_attached_snapshot) rather than read every row back.
    struct StateSnapshot {
        std::uint64_t rows = 0;
        std::shared_ptr<const attach::AttachedState> state;
    };
    std::vector<StateSnapshot> take_snapshots();

signals:
    void started();
    void status(const QString& text);
    void finished(const QString& summary);
    void failed(const QString& message);

private:
    void run(AttachSettings settings, std::shared_ptr<profiler::LiveEventQueue> queue);
    void join();

    std::thread thread_;
    std::atomic<bool> running_{false};
    std::atomic<bool> stop_{false};
    mutable std::mutex queue_mutex_; // also guards snapshots_
    std::shared_ptr<profiler::LiveEventQueue> queue_;
    std::vector<StateSnapshot> snapshots_;
};

} // namespace kvscope::ui
