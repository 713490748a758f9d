// One attach, recorded or not, wired once: `kvscope attach` and the app's
// Attach both start here. The targets become the session's sources and
// metrics pollers (their checks in attach_session.h); the recording opens
// with the endpoints and tokenizer in its metadata; the attached events go
// to it and to the caller's sinks (the app's live view). The caller polls
// as it likes (a status line, a window's snapshots); end() writes the final
// status, close() the summary, and the recording closes.
#pragma once

#include "engine/events/engine_event.h"
#include "engine/events/tee_sink.h"
#include "profiler/attach/attach_session.h"
#include "profiler/recording/recorder.h"

#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace kvscope::profiler {

struct AttachRecording {
    std::filesystem::path path; // empty: nothing is recorded
    bool overwrite = false;
    std::string recorded_by = "kvscope attach";
    std::string tokenizer_path; // the GGUF given for the token ids, kept for replays
};

class RecordedAttach {
public:
    // Throws std::invalid_argument (targets that do not go together, an
    // endpoint ZeroMQ cannot parse) or RecordingError (the file). `sinks`
    // (null ones skipped) must outlive the attach.
    RecordedAttach(const attach::AttachTargets& targets, const AttachRecording& recording,
                   const std::vector<events::EventSink*>& sinks);
    ~RecordedAttach();
    RecordedAttach(const RecordedAttach&) = delete;
    RecordedAttach& operator=(const RecordedAttach&) = delete;

    attach::AttachSession& session() { return *session_; }
    const attach::AttachSession& session() const { return *session_; }
    // Every source's endpoint or URL, as attached.
    const std::vector<std::string>& endpoints() const { return endpoints_; }
    bool recording() const { return recorder_ != nullptr; }

    // The attach ends (it ends when stopped: the recording is whole): each
    // source's last status rows. Once; close() calls it when not yet done.
    void end();
    struct Closed {
        RecorderStats written;   // all zero unrecorded
        std::string write_error; // the recording could not be closed; empty: fine
    };
    // Ends the attach, writes its summary (attach_summary_json) into the
    // recording and closes it.
    Closed close(double seconds);

private:
    std::vector<std::string> endpoints_;
    std::unique_ptr<Recorder> recorder_;
    events::TeeSink tee_;
    std::unique_ptr<attach::AttachSession> session_;
    bool ended_ = false;
};

// What each attached engine held after `seconds`: per source its stream's
// counts, residency (stored, removed, clears), capacity, polled metrics and
// per rank and tier the resident blocks and prefix trees. `kvscope attach
// --json` prints it; recordings keep it as their "summary".
nlohmann::json attach_summary_json(const attach::AttachSession& session, double seconds);

// An attached engine's own metrics as last polled (--metrics), the values
// it reported only: `kvscope attach --json`, `kvscope stats --json`.
nlohmann::json metrics_summary_json(const attach::MetricsSummary& metrics);

} // namespace kvscope::profiler
