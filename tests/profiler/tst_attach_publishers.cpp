// KvEventSource and ResidentBlocks against code nobody here wrote: vLLM's and
// SGLang's own ZeroMQ publishers, as their wheels ship them (fetched into the
// cache by scripts/fetch_publishers.py, driven by
// tests/profiler/publishers/drive_publisher.py with the cache's venv). The
// driver publishes a seeded random workload with the publisher's own event
// classes and writes the resident state it implies; what kvscope decodes
// must equal it exactly. Also: gaps filled from the publisher's real replay
// buffer, a publisher restarting on the same ports, garbage on its PUB
// socket, and a publisher killed while batches are in flight.
#include "profiler/attach/attached_events.h"
#include "profiler/attach/kv_event_source.h"
#include "profiler/attach/resident_blocks.h"
#include "profiler/recording/event_rows.h"
#include "profiler/recording/sqlite_util.h"

#include <arpa/inet.h>
#include <array>
#include <chrono>
#include <csignal>
#include <netinet/in.h>
#include <optional>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>
#include <zmq.hpp>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>

using namespace kvscope::attach;
using namespace std::chrono_literals;

namespace {

struct PublisherFile {
    const char* name;   // the cache directory scripts/fetch_publishers.py makes
    const char* engine; // the driver's --engine
    const char* path;   // inside the wheel
};

// Kept in step with PUBLISHERS in scripts/fetch_publishers.py.
constexpr std::array kPublishers = {
    PublisherFile{"vllm-0.23.0", "vllm", "vllm/distributed/kv_events.py"}, // array events
    PublisherFile{"vllm-0.33.0", "vllm", "vllm/distributed/kv_events.py"}, // map events
    PublisherFile{"sglang-0.5.19", "sglang", "sglang/srt/disaggregation/kv_events.py"}, // array
    PublisherFile{"sglang-0.5.23", "sglang", "sglang/srt/disaggregation/kv_events.py"}, // map
};

QString cache_dir() {
    QString base = qEnvironmentVariable("XDG_CACHE_HOME");
    if (base.isEmpty()) {
        base = QDir::homePath() + "/.cache";
    }
    return base + "/kvscope/publishers";
}

QString venv_python() {
    return cache_dir() + "/venv/bin/python";
}

QString publisher_path(const PublisherFile& publisher) {
    return cache_dir() + "/" + publisher.name + "/" + publisher.path;
}

const PublisherFile* find_publisher(const QString& name) {
    for (const PublisherFile& publisher : kPublishers) {
        if (name == publisher.name) {
            return &publisher;
        }
    }
    return nullptr;
}

// Two loopback ports nobody holds: bound together (so they differ), then let
// go for the driver. A never-connected socket leaves no TIME_WAIT behind.
std::optional<std::array<int, 2>> free_ports() {
    std::array<int, 2> fds{-1, -1};
    std::array<int, 2> ports{};
    bool ok = true;
    for (std::size_t i = 0; i < fds.size() && ok; ++i) {
        fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof(address);
        ok = fds[i] >= 0 &&
             ::bind(fds[i], reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
             ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&address), &length) == 0;
        ports[i] = ntohs(address.sin_port);
    }
    for (int fd : fds) {
        if (fd >= 0) {
            ::close(fd);
        }
    }
    return ok ? std::optional(ports) : std::nullopt;
}

QJsonValue optional_int(const std::optional<std::int64_t>& value) {
    return value ? QJsonValue(static_cast<qint64>(*value)) : QJsonValue(QJsonValue::Null);
}

// The decoded state in the driver's JSON shape:
// {"rank/medium": {hash hex: {parent, token_ids, block_size, lora_id, group_idx, stored_at}}}
QJsonObject state_json(const ResidentBlocks& blocks) {
    QJsonObject state;
    for (const auto& [key, tier] : blocks.tiers()) {
        if (tier.blocks.empty()) {
            continue;
        }
        QJsonObject tier_json;
        for (const auto& [hash, block] : tier.blocks) {
            QJsonArray tokens;
            for (std::int64_t token : block.token_ids) {
                tokens.append(static_cast<qint64>(token));
            }
            tier_json.insert(QString::fromStdString(hash.hex()),
                             QJsonObject{
                                 {"parent", block.parent ? QJsonValue(QString::fromStdString(
                                                               block.parent->hex()))
                                                         : QJsonValue(QJsonValue::Null)},
                                 {"token_ids", tokens},
                                 {"block_size", static_cast<qint64>(block.block_size)},
                                 {"lora_id", optional_int(block.lora_id)},
                                 {"group_idx", optional_int(block.group_idx)},
                                 {"stored_at", block.stored_at},
                             });
        }
        state.insert(QString::number(key.rank) + "/" + QString::fromStdString(key.medium),
                     tier_json);
    }
    return state;
}

QString compact(const QJsonValue& value) {
    if (value.isUndefined()) {
        return "(absent)";
    }
    return QString::fromUtf8(QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact));
}

// The first few differences, to say what went wrong rather than only that.
QStringList differences(const QJsonObject& expected, const QJsonObject& actual) {
    QStringList out;
    QStringList tiers = expected.keys() + actual.keys();
    tiers.removeDuplicates();
    for (const QString& tier : tiers) {
        const QJsonObject want = expected.value(tier).toObject();
        const QJsonObject got = actual.value(tier).toObject();
        QStringList hashes = want.keys() + got.keys();
        hashes.removeDuplicates();
        for (const QString& hash : hashes) {
            if (want.value(hash) != got.value(hash) && out.size() < 5) {
                out << QString("%1 %2: expected %3, decoded %4")
                           .arg(tier, hash, compact(want.value(hash)), compact(got.value(hash)));
            }
        }
    }
    return out;
}

// Runs one driver and keeps what a kvscope attach would keep.
struct Attached {
    QJsonObject expected;
    ResidentBlocks blocks;
    SourceCounts counts;
    std::string last_error;               // the source's, for a status line
    std::vector<std::uint64_t> sequences; // as handed back, in order
    QStringList live_topics;              // of the batches from the SUB socket, each once
    int exit_code = -1;
    bool crashed_on_its_own = false;
    QString driver_stderr;
    QString command; // to run the driver again by hand
};

bool read_line(QProcess& process, const QByteArray& want, QString& seen) {
    while (process.canReadLine()) {
        const QByteArray line = process.readLine().trimmed();
        seen += QString::fromUtf8(line) + "\n";
        if (line == want) {
            return true;
        }
    }
    return false;
}

} // namespace

class TestAttachPublishers : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void decoded_state_equals_what_was_published_data();
    void decoded_state_equals_what_was_published();
    void gaps_are_filled_from_the_publishers_replay_buffer_data();
    void gaps_are_filled_from_the_publishers_replay_buffer();
    void a_restarted_publisher_voids_what_it_said_before_data();
    void a_restarted_publisher_voids_what_it_said_before();
    void garbage_on_the_pub_socket_is_counted_not_fatal_data();
    void garbage_on_the_pub_socket_is_counted_not_fatal();
    void a_publisher_killed_mid_stream_leaves_a_consistent_prefix_data();
    void a_publisher_killed_mid_stream_leaves_a_consistent_prefix();
    void kvscope_attach_records_a_vllm_stream();

private:
    static void publisher_rows();
    void attach(const QString& publisher, const QString& mode, const QString& hashes, int rank,
                Attached& out, const QString& topic = {});
    static void compare_state(const QJsonObject& expected, const Attached& run);

    QTemporaryDir work_;
    int run_ = 0;
};

void TestAttachPublishers::initTestCase() {
    QVERIFY(work_.isValid());
    // A missing cache fails (it does not skip): CI runs scripts/setup.sh first.
    QStringList missing;
    if (!QFile::exists(venv_python())) {
        missing << venv_python();
    }
    for (const PublisherFile& publisher : kPublishers) {
        if (!QFile::exists(publisher_path(publisher))) {
            missing << publisher_path(publisher);
        }
    }
    if (!missing.isEmpty()) {
        QFAIL(qPrintable("the engines' publishers are not fetched (missing: " + missing.join(", ") +
                         "). Run scripts/setup.sh (or scripts/fetch_publishers.py) first."));
    }
}

void TestAttachPublishers::attach(const QString& publisher, const QString& mode,
                                  const QString& hashes, int rank, Attached& out,
                                  const QString& topic) {
    const PublisherFile* file = find_publisher(publisher);
    QVERIFY(file != nullptr);
    const auto ports = free_ports();
    QVERIFY(ports.has_value());
    const QString endpoint = QString("tcp://127.0.0.1:%1").arg((*ports)[0]);
    const QString replay = QString("tcp://127.0.0.1:%1").arg((*ports)[1]);
    const QString expected_path = work_.filePath(QString("expected-%1.json").arg(run_++));

    QProcess driver;
    driver.setProgram(venv_python());
    QStringList arguments{
        QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/profiler/publishers/drive_publisher.py")};
    arguments << "--publisher" << publisher_path(*file) << "--engine" << file->engine;
    arguments << "--endpoint" << endpoint << "--replay" << replay;
    arguments << "--expected" << expected_path << "--mode" << mode << "--topic" << topic;
    arguments << "--hashes" << hashes << "--rank" << QString::number(rank);
    arguments << "--seed" << QString::number(run_);
    driver.setArguments(arguments);
    out.command = venv_python() + " " + arguments.join(' ');
    driver.start();
    QVERIFY2(driver.waitForStarted(10'000), qPrintable(driver.errorString()));
    // Killed, not asked to stop, once we are done: vLLM's shutdown() waits a
    // second for its queue, and nothing here depends on a clean exit.
    const auto stop = qScopeGuard([&] {
        if (driver.state() != QProcess::NotRunning) {
            driver.kill();
            driver.waitForFinished(5'000);
        }
    });

    QString said;
    QElapsedTimer clock;
    clock.start();
    while (!read_line(driver, "ready", said)) {
        QVERIFY2(driver.state() == QProcess::Running && clock.elapsed() < 10'000,
                 qPrintable("the driver never got ready: " + said +
                            QString::fromUtf8(driver.readAllStandardError())));
        driver.waitForReadyRead(100);
    }

    zmq::context_t context;
    KvEventSourceOptions options;
    options.endpoint = endpoint.toStdString();
    options.replay_endpoint = replay.toStdString();
    options.topic = topic.toStdString();
    KvEventSource source(context, options);

    bool done = false;
    bool died = false;
    std::optional<std::uint64_t> final_sequence;
    QElapsedTimer since_death;
    while (clock.elapsed() < 15'000) {
        for (SourceBatch& batch : source.poll(20ms)) {
            if (batch.restarted) {
                out.blocks.clear();
            }
            out.blocks.apply(batch.batch);
            out.sequences.push_back(batch.batch.sequence);
            const QString topic_seen = QString::fromStdString(batch.batch.topic);
            if (!batch.replayed && !out.live_topics.contains(topic_seen)) {
                out.live_topics << topic_seen;
            }
        }
        if (!done && read_line(driver, "done", said)) {
            done = true;
            QFile file_in(expected_path);
            QVERIFY(file_in.open(QIODevice::ReadOnly));
            out.expected = QJsonDocument::fromJson(file_in.readAll()).object();
            final_sequence = static_cast<std::uint64_t>(out.expected["final_sequence"].toInteger());
        }
        if (done && source.last_sequence() == final_sequence) {
            break;
        }
        if (!died && driver.waitForFinished(0)) {
            died = true;
            since_death.start();
        }
        // A dead publisher: keep listening a while (nothing may break), then stop.
        if (died && since_death.elapsed() > 300) {
            break;
        }
        driver.waitForReadyRead(0);
    }
    out.counts = source.counts();
    out.last_error = source.last_error();
    out.driver_stderr = QString::fromUtf8(driver.readAllStandardError());
    if (died) {
        out.crashed_on_its_own = true;
        out.exit_code = driver.exitCode();
        if (out.expected.isEmpty()) {
            QFile file_in(expected_path);
            QVERIFY2(file_in.open(QIODevice::ReadOnly), qPrintable(out.driver_stderr));
            out.expected = QJsonDocument::fromJson(file_in.readAll()).object();
        }
        return;
    }
    QVERIFY2(done, qPrintable("the driver did not finish: " + said + out.driver_stderr));
    QVERIFY2(source.last_sequence() == final_sequence,
             qPrintable(QString("the last batch (%1) never arrived; got %2 batches")
                            .arg(out.expected["final_sequence"].toInteger())
                            .arg(out.sequences.size())));
}

void TestAttachPublishers::compare_state(const QJsonObject& expected, const Attached& run) {
    const QJsonObject actual = state_json(run.blocks);
    const QStringList diff = differences(expected, actual);
    QVERIFY2(diff.isEmpty(), qPrintable("decoded state differs from the published one:\n  " +
                                        diff.join("\n  ") + "\n  driver: " + run.command));
    QVERIFY(!actual.isEmpty()); // a workload that left nothing would prove nothing
}

// Every publisher with each hash form its engine uses and a rank other than 0
// somewhere (the publishers add it to the port, and send it in the batch).
void TestAttachPublishers::publisher_rows() {
    QTest::addColumn<QString>("publisher");
    QTest::addColumn<QString>("hashes");
    QTest::addColumn<int>("rank");
    QTest::newRow("vllm-0.23.0 (array) uint64 hashes") << "vllm-0.23.0"
                                                       << "uint" << 0;
    QTest::newRow("vllm-0.23.0 (array) sha256 bytes, rank 1") << "vllm-0.23.0"
                                                              << "bytes" << 1;
    QTest::newRow("vllm-0.33.0 (map) sha256 bytes") << "vllm-0.33.0"
                                                    << "bytes" << 0;
    QTest::newRow("vllm-0.33.0 (map) uint64 hashes, rank 2") << "vllm-0.33.0"
                                                             << "uint" << 2;
    QTest::newRow("sglang-0.5.19 (array) int64 hashes") << "sglang-0.5.19"
                                                        << "int64" << 0;
    QTest::newRow("sglang-0.5.19 (array) int64 hashes, rank 3") << "sglang-0.5.19"
                                                                << "int64" << 3;
    QTest::newRow("sglang-0.5.23 (map) int64 hashes") << "sglang-0.5.23"
                                                      << "int64" << 0;
    QTest::newRow("sglang-0.5.23 (map) int64 hashes, rank 1") << "sglang-0.5.23"
                                                              << "int64" << 1;
}

// Counts every mode shares: the publishers' events all decode, nothing is
// dropped or unknown.
#define CHECK_CLEAN_DECODE(counts)                                                                 \
    do {                                                                                           \
        QCOMPARE((counts).decode.malformed_events, std::int64_t{0});                               \
        QCOMPARE((counts).decode.unknown_event_types, std::int64_t{0});                            \
        QCOMPARE((counts).decode.unknown_fields, std::int64_t{0});                                 \
    } while (false)

void TestAttachPublishers::decoded_state_equals_what_was_published_data() {
    publisher_rows();
}

void TestAttachPublishers::decoded_state_equals_what_was_published() {
    QFETCH(QString, publisher);
    QFETCH(QString, hashes);
    QFETCH(int, rank);
    Attached run;
    attach(publisher, "normal", hashes, rank, run);
    if (QTest::currentTestFailed()) {
        return;
    }
    compare_state(run.expected["final"].toObject(), run);
    const SourceCounts& c = run.counts;
    QCOMPARE(c.gaps, std::int64_t{0});
    QCOMPARE(c.lost, std::int64_t{0});
    QCOMPARE(c.restarts, std::int64_t{0});
    QCOMPARE(c.decode_errors, std::int64_t{0});
    CHECK_CLEAN_DECODE(c);
    QCOMPARE(run.sequences.front(), 0u);
}

void TestAttachPublishers::gaps_are_filled_from_the_publishers_replay_buffer_data() {
    QTest::addColumn<QString>("publisher");
    QTest::addColumn<QString>("hashes");
    QTest::newRow("vllm-0.23.0") << "vllm-0.23.0"
                                 << "uint";
    QTest::newRow("vllm-0.33.0") << "vllm-0.33.0"
                                 << "bytes";
    QTest::newRow("sglang-0.5.19") << "sglang-0.5.19"
                                   << "int64";
    QTest::newRow("sglang-0.5.23") << "sglang-0.5.23"
                                   << "int64";
}

void TestAttachPublishers::gaps_are_filled_from_the_publishers_replay_buffer() {
    QFETCH(QString, publisher);
    QFETCH(QString, hashes);
    Attached run;
    // With a topic: newer publishers put it in replay replies too.
    attach(publisher, "gap", hashes, 0, run, "kv-events");
    if (QTest::currentTestFailed()) {
        return;
    }
    QCOMPARE(run.live_topics, QStringList{"kv-events"});
    compare_state(run.expected["final"].toObject(), run);
    // Runs of consecutive dropped sequence numbers: one gap each.
    const QJsonArray dropped = run.expected["dropped"].toArray();
    QVERIFY(!dropped.isEmpty());
    std::int64_t runs = 0;
    for (qsizetype i = 0; i < dropped.size(); ++i) {
        if (i == 0 || dropped[i].toInteger() != dropped[i - 1].toInteger() + 1) {
            ++runs;
        }
    }
    const SourceCounts& c = run.counts;
    QCOMPARE(c.gaps, runs);
    QCOMPARE(c.replayed, static_cast<std::int64_t>(dropped.size()));
    QCOMPARE(c.lost, std::int64_t{0});
    QCOMPARE(c.restarts, std::int64_t{0});
    CHECK_CLEAN_DECODE(c);
    // Handed back in order, every one once.
    for (std::size_t i = 0; i < run.sequences.size(); ++i) {
        QCOMPARE(run.sequences[i], static_cast<std::uint64_t>(i));
    }
}

void TestAttachPublishers::a_restarted_publisher_voids_what_it_said_before_data() {
    gaps_are_filled_from_the_publishers_replay_buffer_data();
}

void TestAttachPublishers::a_restarted_publisher_voids_what_it_said_before() {
    QFETCH(QString, publisher);
    QFETCH(QString, hashes);
    Attached run;
    attach(publisher, "restart", hashes, 0, run);
    if (QTest::currentTestFailed()) {
        return;
    }
    // Only the second run's blocks: the first engine's cache died with it.
    compare_state(run.expected["final"].toObject(), run);
    const SourceCounts& c = run.counts;
    QCOMPARE(c.restarts, std::int64_t{1});
    QCOMPARE(c.lost, std::int64_t{0});
    QCOMPARE(run.blocks.counts().resets, std::int64_t{1});
    CHECK_CLEAN_DECODE(c);
}

void TestAttachPublishers::garbage_on_the_pub_socket_is_counted_not_fatal_data() {
    gaps_are_filled_from_the_publishers_replay_buffer_data();
}

void TestAttachPublishers::garbage_on_the_pub_socket_is_counted_not_fatal() {
    QFETCH(QString, publisher);
    QFETCH(QString, hashes);
    Attached run;
    attach(publisher, "malformed", hashes, 0, run);
    if (QTest::currentTestFailed()) {
        return;
    }
    compare_state(run.expected["final"].toObject(), run);
    const SourceCounts& c = run.counts;
    const auto garbage = static_cast<std::int64_t>(run.expected["garbage"].toInteger());
    QVERIFY(garbage > 0);
    QCOMPARE(c.decode_errors, garbage);
    QCOMPARE(c.decode.rejected_messages, garbage);
    QVERIFY2(!run.last_error.empty(), "a rejected message must say why");
    qInfo("the source says: %s", run.last_error.c_str());
    QCOMPARE(c.gaps, std::int64_t{0});
    QCOMPARE(c.lost, std::int64_t{0});
    QCOMPARE(c.restarts, std::int64_t{0});
    CHECK_CLEAN_DECODE(c);
}

void TestAttachPublishers::a_publisher_killed_mid_stream_leaves_a_consistent_prefix_data() {
    gaps_are_filled_from_the_publishers_replay_buffer_data();
}

void TestAttachPublishers::a_publisher_killed_mid_stream_leaves_a_consistent_prefix() {
    QFETCH(QString, publisher);
    QFETCH(QString, hashes);
    Attached run;
    attach(publisher, "die", hashes, 0, run);
    if (QTest::currentTestFailed()) {
        return;
    }
    QVERIFY2(run.crashed_on_its_own, "the driver was meant to die by itself");
    QCOMPARE(run.exit_code, 3);
    // Whatever got out before the crash arrived whole and in order: the state
    // is that of the last batch received, never half a batch.
    const auto died_at = run.expected["died_at"].toInteger();
    QVERIFY2(static_cast<qint64>(run.sequences.size()) >= died_at,
             qPrintable(QString("only %1 batches before the crash at %2")
                            .arg(run.sequences.size())
                            .arg(died_at)));
    for (std::size_t i = 0; i < run.sequences.size(); ++i) {
        QCOMPARE(run.sequences[i], static_cast<std::uint64_t>(i));
    }
    const QJsonArray prefixes = run.expected["prefix_states"].toArray();
    compare_state(prefixes[static_cast<qsizetype>(run.sequences.back())].toObject(), run);
    QCOMPARE(run.counts.lost, std::int64_t{0});
    QCOMPARE(run.counts.decode_errors, std::int64_t{0});
    CHECK_CLEAN_DECODE(run.counts);
}

// The whole path a user takes: `kvscope attach --record` on vLLM's own
// publisher; the recording, read back, holds exactly what was published.
void TestAttachPublishers::kvscope_attach_records_a_vllm_stream() {
    const PublisherFile* file = find_publisher("vllm-0.33.0");
    QVERIFY(file != nullptr);
    const auto ports = free_ports();
    QVERIFY(ports.has_value());
    const QString endpoint = QString("tcp://127.0.0.1:%1").arg((*ports)[0]);
    const QString replay = QString("tcp://127.0.0.1:%1").arg((*ports)[1]);
    const QString expected_path = work_.filePath("expected-cli.json");
    const QString recording = work_.filePath("vllm-attached.sqlite");

    QProcess driver;
    driver.setProgram(venv_python());
    driver.setArguments(
        {QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/profiler/publishers/drive_publisher.py"),
         "--publisher", publisher_path(*file), "--engine", file->engine, "--endpoint", endpoint,
         "--replay", replay, "--expected", expected_path, "--mode", "gap", "--topic", "kv-events",
         "--hashes", "uint", "--seed", "11"});
    driver.start();
    QVERIFY2(driver.waitForStarted(10'000), qPrintable(driver.errorString()));
    QProcess attach;
    const auto stop = qScopeGuard([&] {
        for (QProcess* process : {&driver, &attach}) {
            if (process->state() != QProcess::NotRunning) {
                process->kill();
                process->waitForFinished(5'000);
            }
        }
    });
    QString said;
    QElapsedTimer clock;
    clock.start();
    while (!read_line(driver, "ready", said)) {
        QVERIFY2(driver.state() == QProcess::Running && clock.elapsed() < 10'000,
                 qPrintable("the driver never got ready: " + said));
        driver.waitForReadyRead(100);
    }
    attach.start(QStringLiteral(KVSCOPE_CLI_PATH),
                 {"attach", endpoint, "--replay", replay, "--topic", "kv-events", "--record",
                  recording, "--json"});
    QVERIFY(attach.waitForStarted(10'000));
    while (!read_line(driver, "done", said)) {
        QVERIFY2(driver.state() == QProcess::Running && clock.elapsed() < 20'000,
                 qPrintable("the driver did not finish: " + said +
                            QString::fromUtf8(driver.readAllStandardError())));
        driver.waitForReadyRead(100);
    }
    QFile expected_file(expected_path);
    QVERIFY(expected_file.open(QIODevice::ReadOnly));
    const QJsonObject expected =
        QJsonDocument::fromJson(expected_file.readAll()).object()["final"].toObject();

    // What the recording says, once its last commit has everything.
    const auto recorded = [&] {
        AttachedState state;
        const kvscope::profiler::ReadOnlyRecording file_in(recording.toStdString());
        kvscope::profiler::EventRows rows(file_in.db(), recording.toStdString());
        kvscope::events::EngineEvent event;
        while (rows.next(event)) {
            state.apply(event);
        }
        return state;
    };
    const auto state_of = [](const AttachedState& state) {
        const AttachedState::Source* source = state.source(0);
        return source != nullptr ? state_json(source->blocks) : QJsonObject();
    };
    while (clock.elapsed() < 20'000) {
        try {
            if (state_of(recorded()) == expected) {
                break;
            }
        } catch (const std::exception&) {
            // Not a recording yet: its first commit is on the way.
        }
        QTest::qWait(100);
    }
    ::kill(static_cast<pid_t>(attach.processId()), SIGINT);
    QVERIFY(attach.waitForFinished(10'000));
    QCOMPARE(attach.exitCode(), 0);
    const AttachedState state = recorded();
    const QStringList diff = differences(expected, state_of(state));
    QVERIFY2(diff.isEmpty(),
             qPrintable("the recording differs from what vLLM published:\n  " + diff.join("\n  ")));
    QVERIFY(!expected.isEmpty());
    // The gaps the driver made were filled from vLLM's replay buffer.
    const QJsonObject summary = QJsonDocument::fromJson(attach.readAllStandardOutput()).object();
    const QJsonObject stream = summary["sources"].toArray()[0].toObject()["stream"].toObject();
    QVERIFY2(stream["gaps"].toInt() > 0, qPrintable(QJsonDocument(summary).toJson()));
    QCOMPARE(stream["lost"].toInt(), 0);
    QCOMPARE(stream["replayed"].toInt() > 0, true);
}

QTEST_GUILESS_MAIN(TestAttachPublishers)
#include "tst_attach_publishers.moc"
