// The golden suites (tokenizer, forward pass, formats; SmolLM2's and Gemma
// 3's) skip when the model they were made with is not the one the engine
// would load, and a skip must not let the README's test command pass
// quietly. This suite fails instead, saying what to do, unless
// KVSCOPE_SKIP_GOLDEN=1 asks to run without them (then it shows as skipped
// too).
#include "tests/support/golden.h"

#include <QtTest>

class TestGoldenModel : public QObject {
    Q_OBJECT

private slots:
    void the_golden_models_are_in_place_data();
    void the_golden_models_are_in_place();
};

void TestGoldenModel::the_golden_models_are_in_place_data() {
    QTest::addColumn<QString>("golden_file");
    QTest::newRow("SmolLM2") << "golden_smollm2.json";
    QTest::newRow("Gemma 3") << "golden_gemma3.json";
}

void TestGoldenModel::the_golden_models_are_in_place() {
    QFETCH(QString, golden_file);
    const QJsonObject golden = kvscope::test::load_golden(qPrintable(golden_file));
    QVERIFY2(!golden.isEmpty(), qPrintable("tests/engine/data/" + golden_file + " is missing"));
    const QString problem =
        golden_file == "golden_gemma3.json"
            ? kvscope::test::golden_model_problem(golden, kvscope::test::gemma3_model_path())
            : kvscope::test::golden_model_problem(golden);
    if (problem.isEmpty()) {
        return;
    }
    if (qEnvironmentVariable("KVSCOPE_SKIP_GOLDEN") == "1") {
        QSKIP(qPrintable("KVSCOPE_SKIP_GOLDEN=1: " + problem));
    }
    QFAIL(qPrintable(problem +
                     "\nThe golden tests compare against this exact model: run scripts/setup.sh "
                     "(and unset KVSCOPE_MODEL), or set KVSCOPE_SKIP_GOLDEN=1 to run the suite "
                     "without them."));
}

QTEST_GUILESS_MAIN(TestGoldenModel)
#include "tst_golden_model.moc"
