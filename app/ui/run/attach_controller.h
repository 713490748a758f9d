// Serving engines attached to (the app's File > Attach to engine), a
// LiveSource: profiler::RecordedAttach polling every publisher, its events
// queued for the window and, when asked, recorded. Status comes back about
// once a second.
#pragma once

#include "app/ui/run/live_source.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <vector>

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

class AttachController : public LiveSource {
    Q_OBJECT
public:
    explicit AttachController(QObject* parent = nullptr);
    ~AttachController() override; // stops and waits for its thread

    // False when an attach is under way or the settings are refused (failed()
    // says why).
    bool start(const AttachSettings& settings);

    // The attach's own state (built from the batches its rows come from),
    // copied every few hundred milliseconds while it changes (less often
    // when a copy takes long) and once at the end, with the number of rows
    // emitted before it: the window's store shows these
    // (AttachedHistory::add_snapshot) rather than read every row back.
    struct StateSnapshot {
        std::uint64_t rows = 0;
        std::shared_ptr<const attach::AttachedState> state;
    };
    std::vector<StateSnapshot> take_snapshots();

    // A store that shows the snapshots instead of reading the rows back.
    std::shared_ptr<profiler::RunStore> new_store() const override;
    // Hands the store the snapshots taken since the last drain.
    void feed(profiler::RunStore& store) override;

private:
    void run(const AttachSettings& settings, const std::stop_token& stop,
             profiler::LiveEventQueue& queue);

    std::mutex snapshots_mutex_;
    std::vector<StateSnapshot> snapshots_;
};

} // namespace kvscope::ui
