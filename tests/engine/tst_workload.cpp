// Workloads: presets are deterministic for a seed and shaped as their names
// promise; traces parse, and malformed lines are refused with their number.
#include "engine/workload/eval_texts.h"
#include "engine/workload/workload.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using workload::WorkloadRequest;

Q_DECLARE_METATYPE(std::string)

class TestWorkload : public QObject {
    Q_OBJECT

private slots:
    void presets_are_deterministic_data();
    void presets_are_deterministic();
    void multi_turn_prompts_grow();
    void eval_texts_are_built_in();
    void trace_parses();
    void malformed_trace_lines_data();
    void malformed_trace_lines();
    void unknown_workload_lists_presets();
    void oversized_trace_file_is_refused();
};

void TestWorkload::presets_are_deterministic_data() {
    QTest::addColumn<std::string>("name");
    for (const std::string& name : workload::workload_preset_names()) {
        QTest::newRow(name.c_str()) << name;
    }
}

void TestWorkload::presets_are_deterministic() {
    QFETCH(std::string, name);
    workload::PresetOptions options;
    options.requests = 12;
    options.seed = 5;
    const auto a = workload::make_preset(name, options);
    const auto b = workload::make_preset(name, options);
    QCOMPARE(a.size(), std::size_t{12});
    QCOMPARE(b.size(), a.size());
    bool same = true;
    for (std::size_t i = 0; i < a.size(); ++i) {
        same = same && a[i].text == b[i].text && a[i].arrival_seconds == b[i].arrival_seconds &&
               a[i].history == b[i].history && a[i].max_tokens == b[i].max_tokens;
        if (i > 0) {
            QVERIFY(a[i].arrival_seconds >= a[i - 1].arrival_seconds);
        }
        QVERIFY(!a[i].text.empty());
    }
    QVERIFY(same);
    options.seed = 6;
    const auto c = workload::make_preset(name, options);
    bool differs = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        differs = differs || a[i].text != c[i].text || a[i].arrival_seconds != c[i].arrival_seconds;
    }
    QVERIFY2(differs, "another seed gives another workload");
}

void TestWorkload::multi_turn_prompts_grow() {
    workload::PresetOptions options;
    options.requests = 8;
    const auto requests = workload::make_preset("multi-turn", options);
    std::size_t longest = 0;
    for (const WorkloadRequest& r : requests) {
        QVERIFY(r.chat);
        QCOMPARE(r.history.size() % 2, std::size_t{0}); // user/assistant pairs
        longest = std::max(longest, r.history.size());
    }
    QCOMPARE(longest, std::size_t{6}); // the fourth turn carries three earlier ones
}

void TestWorkload::eval_texts_are_built_in() {
    QVERIFY(workload::eval_texts().size() >= 3);
    for (const workload::EvalText& text : workload::eval_texts()) {
        QVERIFY2(text.text.size() > 8000, std::string(text.name).c_str()); // 2k+ tokens
    }
    QVERIFY(workload::find_eval_text("alice-in-wonderland-ch1") != nullptr);
    QVERIFY(workload::find_eval_text("nope") == nullptr);
}

void TestWorkload::trace_parses() {
    const auto requests = workload::parse_trace(
        "# comment\n"
        "{\"arrival\": 2, \"prompt\": \"later\", \"max_tokens\": 5}\n"
        "\n"
        "{\"arrival\": 1, \"prompt_ids\": [1, 2, 3], \"temperature\": 0, \"seed\": 9}\n"
        "{\"prompt\": \"hi\", \"chat\": true, \"system\": \"be brief\"}\n",
        "t.jsonl");
    QCOMPARE(requests.size(), std::size_t{3});
    QCOMPARE(requests[0].arrival_seconds, 0.0); // sorted by arrival
    QVERIFY(requests[0].chat);
    QCOMPARE(requests[0].system, std::string("be brief"));
    QCOMPARE(requests[1].ids, (std::vector<std::int32_t>{1, 2, 3}));
    QVERIFY(requests[1].sampling.has_value());
    QCOMPARE(requests[1].sampling->temperature, 0.0f);
    QCOMPARE(requests[1].sampling->seed, std::uint64_t{9});
    QCOMPARE(requests[2].max_tokens, 5);
    QVERIFY(!requests[2].sampling.has_value());
}

void TestWorkload::malformed_trace_lines_data() {
    QTest::addColumn<std::string>("line");
    QTest::addColumn<std::string>("reason");
    QTest::newRow("not json") << std::string("{prompt: 1}") << std::string("not valid JSON");
    // nlohmann reports a number past double's range as out_of_range, not as
    // a parse error (found by fuzz_workload_trace).
    QTest::newRow("number overflow")
        << std::string(R"({"prompt": "x", "arrival": 1e3081})") << std::string("not valid JSON");
    QTest::newRow("array") << std::string("[1]") << std::string("JSON object");
    QTest::newRow("unknown key") << std::string(R"({"prompt": "x", "tokens": 3})")
                                 << std::string("unknown key \"tokens\"");
    QTest::newRow("no prompt") << std::string(R"({"max_tokens": 3})") << std::string("exactly one");
    QTest::newRow("both prompts") << std::string(R"({"prompt": "x", "prompt_ids": [1]})")
                                  << std::string("exactly one");
    QTest::newRow("empty prompt") << std::string(R"({"prompt": ""})") << std::string("non-empty");
    QTest::newRow("bad ids") << std::string(R"({"prompt_ids": [1, -2]})")
                             << std::string("not a token id");
    QTest::newRow("negative arrival")
        << std::string(R"({"prompt": "x", "arrival": -1})") << std::string("must not be negative");
    QTest::newRow("fractional max_tokens")
        << std::string(R"({"prompt": "x", "max_tokens": 2.5})") << std::string("whole number");
    QTest::newRow("string number") << std::string(R"({"prompt": "x", "temperature": "hot"})")
                                   << std::string("must be a number");
    QTest::newRow("bad sampling") << std::string(R"({"prompt": "x", "min_p": 3})")
                                  << std::string("min-p");
    QTest::newRow("chat with ids")
        << std::string(R"({"prompt_ids": [1], "chat": true})") << std::string("needs a text");
}

void TestWorkload::malformed_trace_lines() {
    QFETCH(std::string, line);
    QFETCH(std::string, reason);
    const std::string text = "{\"prompt\": \"fine\"}\n# ok\n" + line + "\n";
    try {
        workload::parse_trace(text, "w.jsonl");
        QFAIL("accepted a malformed line");
    } catch (const workload::WorkloadError& e) {
        const std::string message = e.what();
        QVERIFY2(message.rfind("w.jsonl:3: ", 0) == 0, e.what());
        QVERIFY2(message.find(reason) != std::string::npos, e.what());
    }
}

void TestWorkload::unknown_workload_lists_presets() {
    try {
        workload::load_workload("no-such-preset", {});
        QFAIL("accepted an unknown workload");
    } catch (const std::invalid_argument& e) {
        QVERIFY(std::string(e.what()).find("shared-prefix") != std::string::npos);
    }
    QVERIFY_THROWS_EXCEPTION(workload::WorkloadError, workload::parse_trace("\n# only\n", "e"));
}

// A workload is read whole, so a file past 256 MiB (sparse here: its size
// costs no disk) is refused by its size, before a byte is read.
void TestWorkload::oversized_trace_file_is_refused() {
    QTemporaryDir dir;
    const QString path = dir.filePath("huge.jsonl");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    QVERIFY(file.resize(qint64{257} << 20));
    file.close();
    try {
        workload::load_trace(path.toStdString());
        QFAIL("read a 257 MiB workload");
    } catch (const workload::WorkloadError& e) {
        QVERIFY2(std::string(e.what()).find("257 MiB, more than the 256 MiB") != std::string::npos,
                 e.what());
    }
}

QTEST_GUILESS_MAIN(TestWorkload)
#include "tst_workload.moc"
