// A Qt Test suite whose functions pass, fail and skip on purpose. It is no
// ctest test of its own: tst_suite_skips runs it through ctest exactly as
// kvscope_add_test registers every suite, choosing functions by name.
#include <QTest>

class FixtureOutcomes : public QObject {
    Q_OBJECT

private slots:
    void passes() { QVERIFY(true); }
    void fails() { QFAIL("fails on purpose"); }
    void skips() { QSKIP("skips on purpose"); }
};

QTEST_GUILESS_MAIN(FixtureOutcomes)
#include "fixture_outcomes.moc"
