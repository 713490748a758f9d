// The suite's own honesty: a suite that skipped its tests shows as skipped
// in ctest's report, not as passed, and a missing model makes the run fail
// (tst_golden_model) unless KVSCOPE_SKIP_GOLDEN=1 asks to go without it.
// Runs ctest on this build with KVSCOPE_MODEL pointing nowhere.
#include "tests/support/run_process.h"

#include <QProcessEnvironment>
#include <QRegularExpression>
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

} // namespace

class TestSuiteSkips : public QObject {
    Q_OBJECT

private slots:
    void a_suite_without_its_model_shows_as_skipped();
    void a_missing_golden_model_fails_the_run();
    void skipping_golden_on_purpose_shows_as_skipped();
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

QTEST_GUILESS_MAIN(TestSuiteSkips)
#include "tst_suite_skips.moc"
