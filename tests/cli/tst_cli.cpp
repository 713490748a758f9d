// The kvscope command's contract: help, version, exit statuses and messages
// for bad command lines, and `info` in text and JSON.
#include "engine/model_path.h"
#include "tests/support/run_process.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

#define SKIP_WITHOUT_MODEL()                                                                       \
    if (const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());    \
        !problem.empty()) {                                                                        \
        QSKIP(qPrintable("needs the model (run scripts/setup.sh): " +                              \
                         QString::fromStdString(problem)));                                        \
    }

class TestCli : public QObject {
    Q_OBJECT

private slots:
    void exit_status_and_message_data();
    void exit_status_and_message();
    void info_json_reports_build_and_model();
    void info_json_honours_kvscope_model();
    void generate_streams_text_and_reports_speed();
    void generate_is_repeatable_with_a_seed();
    void generate_reports_an_invalid_model_file();
    void bench_prints_json_rows();
};

void TestCli::exit_status_and_message_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("expected_text"); // in stdout or stderr

    QTest::newRow("help") << QStringList{"--help"} << 0 << "info";
    QTest::newRow("short help") << QStringList{"-h"} << 0 << "Usage";
    QTest::newRow("version") << QStringList{"--version"} << 0 << "kvscope 0.";
    QTest::newRow("subcommand help") << QStringList{"info", "--help"} << 0 << "--json";
    QTest::newRow("no subcommand") << QStringList{} << 2 << "a subcommand is required";
    QTest::newRow("unknown subcommand")
        << QStringList{"frobnicate"} << 2 << "unknown subcommand 'frobnicate'";
    QTest::newRow("unknown option") << QStringList{"--frobnicate"} << 2 << "--frobnicate";
    QTest::newRow("unknown subcommand option")
        << QStringList{"info", "--frobnicate"} << 2 << "--frobnicate";
    QTest::newRow("stray argument") << QStringList{"info", "extra"} << 2 << "extra";
    QTest::newRow("info") << QStringList{"info"} << 0 << "Model";
    QTest::newRow("generate without prompt") << QStringList{"generate"} << 2 << "--prompt";
    QTest::newRow("generate bad top-p")
        << QStringList{"generate", "-p", "hi", "--top-p", "2"} << 2 << "--top-p";
    QTest::newRow("generate missing model file")
        << QStringList{"generate", "-p", "hi", "-m", "/no/such/model.gguf"} << 2 << "model.gguf";
    QTest::newRow("bench bad batch") << QStringList{"bench", "-b", "0"} << 2 << "--batch";
}

void TestCli::exit_status_and_message() {
    QFETCH(QStringList, arguments);
    QFETCH(int, exit_code);
    QFETCH(QString, expected_text);

    const auto result = run_process(KVSCOPE_CLI_PATH, arguments);
    QVERIFY2(result.started, qPrintable(result.err));
    QVERIFY(result.finished);
    QCOMPARE(result.exit_code, exit_code);
    const QString printed = result.out + result.err;
    QVERIFY2(printed.contains(expected_text),
             qPrintable("expected '" + expected_text + "' in:\n" + printed));
    if (exit_code == 2) {
        // Usage errors go to stderr, so scripts piping stdout see nothing odd.
        QVERIFY2(result.err.contains(expected_text), qPrintable(result.err));
    }
}

void TestCli::info_json_reports_build_and_model() {
    const auto result = run_process(KVSCOPE_CLI_PATH, {"info", "--json"});
    QCOMPARE(result.exit_code, 0);
    QJsonParseError error{};
    const QJsonDocument document = QJsonDocument::fromJson(result.out.toUtf8(), &error);
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
    const QJsonObject info = document.object();
    QVERIFY(info.value("version").toString().startsWith("0."));
    QVERIFY(info.contains("cuda_compiled"));
    QVERIFY(info.value("gpus").isArray());
    QVERIFY(!info.value("sqlite_version").toString().isEmpty());
    QVERIFY(info.value("model").toObject().value("path").toString().endsWith(".gguf"));
}

void TestCli::info_json_honours_kvscope_model() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString missing = dir.filePath("no-such-model.gguf");
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("KVSCOPE_MODEL", missing);

    const auto result = run_process(KVSCOPE_CLI_PATH, {"info", "--json"}, environment);
    QCOMPARE(result.exit_code, 0); // a missing model is reported, not a failure
    const QJsonObject model =
        QJsonDocument::fromJson(result.out.toUtf8()).object().value("model").toObject();
    QCOMPARE(model.value("path").toString(), missing);
    QCOMPARE(model.value("from_KVSCOPE_MODEL").toBool(), true);
    QCOMPARE(model.value("available").toBool(), false);
    QVERIFY(model.value("problem").toString().contains("not found"));
}

void TestCli::generate_streams_text_and_reports_speed() {
    SKIP_WITHOUT_MODEL();
    const auto result = run_process(KVSCOPE_CLI_PATH, {"generate", "--chat", "-p", "What is 2+2?",
                                                       "-n", "12", "--temperature", "0"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    QVERIFY2(!result.out.trimmed().isEmpty(), "no text generated");
    QVERIFY2(result.err.contains("prefill") && result.err.contains("decode") &&
                 result.err.contains("tokens/s"),
             qPrintable(result.err));
}

void TestCli::generate_is_repeatable_with_a_seed() {
    SKIP_WITHOUT_MODEL();
    const QStringList arguments{"generate", "-p", "Once upon a time", "-n", "16", "--seed", "42"};
    const auto first = run_process(KVSCOPE_CLI_PATH, arguments);
    const auto second = run_process(KVSCOPE_CLI_PATH, arguments);
    QCOMPARE(first.exit_code, 0);
    QCOMPARE(first.out, second.out);
    QVERIFY(first.err.contains("seed: 42"));
}

void TestCli::generate_reports_an_invalid_model_file() {
    QTemporaryDir dir;
    const QString path = dir.filePath("not-a-model.gguf");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("this is not a GGUF file at all");
    file.close();
    const auto result = run_process(KVSCOPE_CLI_PATH, {"generate", "-p", "hi", "-m", path});
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("not a GGUF file") && result.err.contains(path),
             qPrintable(result.err));
}

void TestCli::bench_prints_json_rows() {
    SKIP_WITHOUT_MODEL();
    const auto result = run_process(
        KVSCOPE_CLI_PATH, {"bench", "-b", "1,2", "-c", "8", "--decode-steps", "2", "--json"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    const QJsonArray rows = QJsonDocument::fromJson(result.out.toUtf8()).array();
    QCOMPARE(rows.size(), 2);
    for (const QJsonValue& row : rows) {
        QVERIFY(row.toObject().value("decode_tokens_per_second").toDouble() > 0);
        QVERIFY(row.toObject().value("prefill_tokens_per_second").toDouble() > 0);
    }
    QCOMPARE(rows[1].toObject().value("batch").toInt(), 2);
}

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
