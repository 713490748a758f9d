// The recipes both front ends run (profiler/recorded_run.h,
// recorded_attach.h), on the tiny random-weight model: what a recording of
// a stopped run says about itself, where kvscope gate's step hook is called
// and when, and an attach whose endpoint is wrong leaving no file behind.
#include "profiler/recorded_attach.h"
#include "profiler/recorded_run.h"
#include "profiler/recording/recording_reader.h"
#include "tests/support/tiny_model.h"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;

namespace {

session::RunConfig tiny_run() {
    session::RunConfig config;
    config.model_path = tiny_model_path();
    config.backend.kind = session::BackendKind::cpu;
    config.workload = "shared-prefix";
    config.preset.requests = 3;
    config.preset.max_tokens = 6;
    config.real_time = false;
    return config;
}

// kvscope gate's side, as the run sees it: the order of its calls.
class LoggingHook final : public profiler::StepHook {
public:
    void before_step() override { calls.push_back("before"); }
    void after_step() override { calls.push_back("after"); }
    bool let_go() const override { return false; }
    void finish(bool completed) override {
        calls.push_back(completed ? "finish completed" : "finish cut short");
        // The recording is saved after the gate has its turn back.
        saved_at_finish =
            std::filesystem::exists(path) && !profiler::recording_metadata(path).count("complete");
    }
    std::string metadata_key() const override { return "steps_in_turns"; }

    std::vector<std::string> calls;
    std::filesystem::path path;
    bool saved_at_finish = false;
};

} // namespace

class TestRecordedRun : public QObject {
    Q_OBJECT

private slots:
    void step_hook_turns_around_every_step();
    void a_stop_marks_the_recording_interrupted();
    void an_attach_to_a_bad_endpoint_leaves_no_file();
};

void TestRecordedRun::step_hook_turns_around_every_step() {
    QTemporaryDir dir;
    LoggingHook hook;
    hook.path = dir.filePath("turns.sqlite").toStdString();
    profiler::RecordingOptions recording;
    recording.path = hook.path;
    std::vector<std::string> notices;
    profiler::RecordedRun run(
        tiny_run(), recording, {},
        [&](const std::string& text, profiler::RecordedRun::NoticeKind) {
            notices.push_back(text);
        },
        &hook);
    const profiler::ServedRun served = run.serve({});
    QVERIFY(!served.interrupted);
    QCOMPARE(served.summary.finished, 3);
    // before, after for every step, then finish once, completed.
    QVERIFY(hook.calls.size() >= 3);
    QCOMPARE(hook.calls.back(), std::string("finish completed"));
    const auto steps = static_cast<std::size_t>(served.summary.steps);
    QCOMPARE(hook.calls.size(), 2 * steps + 1);
    for (std::size_t i = 0; i < steps; ++i) {
        QCOMPARE(hook.calls[2 * i], std::string("before"));
        QCOMPARE(hook.calls[2 * i + 1], std::string("after"));
    }
    QVERIFY2(hook.saved_at_finish, "finish came after the recording was saved");
    const auto metadata = profiler::recording_metadata(hook.path);
    QCOMPARE(metadata.at("steps_in_turns"), std::string("yes"));
    QCOMPARE(metadata.at("complete"), std::string("yes"));
    QVERIFY(metadata.at("summary").find("\"finished\":3") != std::string::npos);
    QVERIFY(!notices.empty()); // the hardware counters, at least
}

void TestRecordedRun::a_stop_marks_the_recording_interrupted() {
    QTemporaryDir dir;
    profiler::RecordingOptions recording;
    recording.path = dir.filePath("stopped.sqlite").toStdString();
    session::RunConfig config = tiny_run();
    config.preset.max_tokens = 64;
    profiler::RecordedRun run(config, recording, {}, {});
    int steps = 0;
    profiler::RecordedRun::ServeOptions serve;
    serve.on_step = [&](const sched::StepStats&) {
        ++steps;
    };
    serve.stop_requested = [&] {
        return steps >= 3;
    };
    const profiler::ServedRun served = run.serve(serve);
    QVERIFY(served.interrupted);
    QVERIFY(!served.let_go);
    QVERIFY(served.summary.finished < 3);
    QVERIFY(served.write_error.empty());
    QVERIFY(served.written.events > 0);
    const auto metadata = profiler::recording_metadata(recording.path);
    QCOMPARE(metadata.at("complete"), std::string("interrupted"));
    QVERIFY(metadata.count("summary") == 1);
}

void TestRecordedRun::an_attach_to_a_bad_endpoint_leaves_no_file() {
    QTemporaryDir dir;
    attach::AttachTargets targets;
    targets.endpoints = {"tcp://"};
    profiler::AttachRecording recording;
    recording.path = dir.filePath("attach.sqlite").toStdString();
    try {
        profiler::RecordedAttach attached(targets, recording, {});
        QFAIL("an endpoint ZeroMQ cannot parse was accepted");
    } catch (const std::invalid_argument& error) {
        QVERIFY2(std::string(error.what()).find("endpoints look like") != std::string::npos,
                 error.what());
    }
    QVERIFY2(!std::filesystem::exists(recording.path), "a recording of an attach that never began");
    // Targets that do not go together are refused before any file is made.
    attach::AttachTargets none;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, profiler::RecordedAttach(none, recording, {}));
    QVERIFY(!std::filesystem::exists(recording.path));
}

QTEST_GUILESS_MAIN(TestRecordedRun)
#include "tst_recorded_run.moc"
