// The kvscope command's contract: help, version, exit statuses and messages
// for bad command lines, and `info` in text and JSON.
#include "tests/support/run_process.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

class TestCli : public QObject {
    Q_OBJECT

private slots:
    void exit_status_and_message_data();
    void exit_status_and_message();
    void info_json_reports_build_and_model();
    void info_json_honours_kvscope_model();
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

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
