// The suite's own honesty: a suite that skipped its tests shows as skipped
// in ctest's report, not as passed; one that failed anything shows as failed
// even when it also skipped; and a missing model makes the run fail
// (tst_golden_model) unless KVSCOPE_SKIP_GOLDEN=1 asks to go without it.
// Runs ctest on this build with KVSCOPE_MODEL pointing nowhere, and on a
// fixture suite registered exactly as this build registers tst_tokenizer.
#include "tests/support/run_process.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

kvscope::test::ProcessResult ctest_without_model(const QString& regex, bool skip_golden) {
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("KVSCOPE_MODEL", "/nonexistent/kvscope-model.gguf");
    environment.remove("KVSCOPE_SKIP_GOLDEN");
    if (skip_golden) {
        environment.insert("KVSCOPE_SKIP_GOLDEN", "1");
    }
    return run_process(KVSCOPE_CTEST, {"--test-dir", KVSCOPE_BINARY_DIR, "-R", regex}, environment);
}

// A CMake string literal of `text`.
QString cmake_quoted(QString text) {
    text.replace("\\", "\\\\").replace("\"", "\\\"").replace("$", "\\$");
    return "\"" + text + "\"";
}

// ctest's verdict per test of a run's output ("Passed", "Failed",
// "Skipped"), by test name.
QMap<QString, QString> verdicts(const QString& ctest_output) {
    QMap<QString, QString> found;
    const QRegularExpression line("Test +#\\d+: (\\S+) \\.+ *\\**(Passed|Failed|Skipped)");
    auto match = line.globalMatch(ctest_output);
    while (match.hasNext()) {
        const auto m = match.next();
        found.insert(m.captured(1), m.captured(2));
    }
    return found;
}

} // namespace

class TestSuiteSkips : public QObject {
    Q_OBJECT

private slots:
    void a_suite_without_its_model_shows_as_skipped();
    void a_missing_golden_model_fails_the_run();
    void skipping_golden_on_purpose_shows_as_skipped();
    void a_failure_beside_a_skip_fails_the_suite();
};

void TestSuiteSkips::a_suite_without_its_model_shows_as_skipped() {
    const auto result = ctest_without_model("^tst_tokenizer$", false);
    QVERIFY2(result.finished, qPrintable(result.err));
    QVERIFY2(result.out.contains("tst_tokenizer") && result.out.contains("Skipped"),
             qPrintable(result.out));
    QVERIFY2(!result.out.contains(QRegularExpression("tst_tokenizer \\.+ +Passed")),
             qPrintable(result.out));
}

void TestSuiteSkips::a_missing_golden_model_fails_the_run() {
    const auto result = ctest_without_model("^tst_golden_model$", false);
    QVERIFY2(result.finished, qPrintable(result.err));
    QVERIFY2(result.exit_code != 0, qPrintable(result.out));
    QVERIFY2(result.out.contains("Failed"), qPrintable(result.out));
}

void TestSuiteSkips::skipping_golden_on_purpose_shows_as_skipped() {
    const auto result = ctest_without_model("^tst_golden_model$", true);
    QVERIFY2(result.finished, qPrintable(result.err));
    QCOMPARE(result.exit_code, 0);
    QVERIFY2(result.out.contains("Skipped"), qPrintable(result.out));
}

// The fixture suite run through ctest the way this build registers its
// suites (tst_tokenizer's command and properties, read from ctest itself,
// with the program swapped): failed whenever a function failed, skipped when
// one skipped and none failed, passed otherwise.
void TestSuiteSkips::a_failure_beside_a_skip_fails_the_suite() {
    const auto listing =
        run_process(KVSCOPE_CTEST, {"--test-dir", KVSCOPE_BINARY_DIR, "--show-only=json-v1", "-R",
                                    "^tst_tokenizer$"});
    QVERIFY2(listing.finished && listing.exit_code == 0, qPrintable(listing.err));
    const QJsonArray tests =
        QJsonDocument::fromJson(listing.out.toUtf8()).object().value("tests").toArray();
    QCOMPARE(tests.size(), 1);
    const QJsonObject registered = tests.first().toObject();
    QStringList command;
    bool swapped = false;
    for (const QJsonValue& part : registered.value("command").toArray()) {
        if (part.toString().endsWith("/tst_tokenizer")) {
            command << KVSCOPE_FIXTURE_OUTCOMES;
            swapped = true;
        } else {
            command << part.toString();
        }
    }
    QVERIFY2(swapped, "tst_tokenizer's command names no tst_tokenizer program");
    QString properties;
    for (const QJsonValue& property : registered.value("properties").toArray()) {
        const QJsonObject p = property.toObject();
        const QString name = p.value("name").toString();
        if (name == "LABELS" || name == "WORKING_DIRECTORY") {
            continue;
        }
        QStringList values;
        if (p.value("value").isArray()) {
            for (const QJsonValue& v : p.value("value").toArray()) {
                values << v.toVariant().toString();
            }
        } else {
            values << p.value("value").toVariant().toString();
        }
        properties += " " + name + " " + cmake_quoted(values.join(";"));
    }

    const QMap<QString, QStringList> cases = {
        {"fixture_fail_and_skip", {"fails", "skips"}},
        {"fixture_skip_only", {"skips"}},
        {"fixture_pass_and_skip", {"passes", "skips"}},
        {"fixture_pass", {"passes"}},
    };
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QFile file(QDir(dir.path()).filePath("CTestTestfile.cmake"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    for (auto it = cases.begin(); it != cases.end(); ++it) {
        QStringList words;
        for (const QString& part : command + it.value()) {
            words << cmake_quoted(part);
        }
        file.write(("add_test(" + it.key() + " " + words.join(" ") + ")\n").toUtf8());
        if (!properties.isEmpty()) {
            file.write(
                ("set_tests_properties(" + it.key() + " PROPERTIES" + properties + ")\n").toUtf8());
        }
    }
    file.close();

    const auto run = run_process(KVSCOPE_CTEST, {"--test-dir", dir.path()});
    QVERIFY2(run.finished, qPrintable(run.err));
    const QMap<QString, QString> got = verdicts(run.out);
    QCOMPARE(got.value("fixture_fail_and_skip"), QString("Failed"));
    QCOMPARE(got.value("fixture_skip_only"), QString("Skipped"));
    QCOMPARE(got.value("fixture_pass_and_skip"), QString("Skipped"));
    QCOMPARE(got.value("fixture_pass"), QString("Passed"));
    QVERIFY2(run.exit_code != 0, qPrintable(run.out)); // the failure fails the run

    // Without the failing suite, skips fail nothing.
    const auto clean = run_process(KVSCOPE_CTEST, {"--test-dir", dir.path(), "-E", "fail"});
    QVERIFY2(clean.finished, qPrintable(clean.err));
    QCOMPARE(clean.exit_code, 0);
}

QTEST_GUILESS_MAIN(TestSuiteSkips)
#include "tst_suite_skips.moc"
