// kvscope-ui's command line: what it accepts, and the exit status and message
// for what it does not.
#include "app/ui/ui_options.h"

#include <QTest>

using kvscope::ui::parse_ui_options;

class TestUiOptions : public QObject {
    Q_OBJECT

private slots:
    void accepted_data();
    void accepted();
    void refused_data();
    void refused();
    void help_and_version_exit_zero();
    void demo_names_a_teaching_demo();
};

void TestUiOptions::accepted_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<bool>("demo");
    QTest::addColumn<QString>("screenshot");
    QTest::addColumn<double>("after");
    QTest::addColumn<QString>("recording");

    QTest::newRow("nothing") << QStringList{} << false << QString() << 2.0 << QString();
    QTest::newRow("demo") << QStringList{"--demo"} << true << QString() << 2.0 << QString();
    QTest::newRow("screenshot") << QStringList{"--screenshot", "a.png"} << false << "a.png" << 2.0
                                << QString();
    QTest::newRow("screenshot after")
        << QStringList{"--demo", "--screenshot", "a.png", "--screenshot-after", "0.5"} << true
        << "a.png" << 0.5 << QString();
    QTest::newRow("recording") << QStringList{"run.sqlite"} << false << QString() << 2.0
                               << "run.sqlite";
    QTest::newRow("recording screenshot") << QStringList{"--screenshot", "a.png", "run.sqlite"}
                                          << false << "a.png" << 2.0 << "run.sqlite";
}

void TestUiOptions::accepted() {
    QFETCH(QStringList, arguments);
    QFETCH(bool, demo);
    QFETCH(QString, screenshot);
    QFETCH(double, after);
    QFETCH(QString, recording);

    const auto result = parse_ui_options(QStringList{"kvscope-ui"} + arguments);
    QVERIFY2(result.options.has_value(), qPrintable(result.message));
    QCOMPARE(result.options->demo, demo);
    QCOMPARE(result.options->screenshot_path, screenshot);
    QCOMPARE(result.options->screenshot_after_s, after);
    QCOMPARE(result.options->recording_path, recording);
}

void TestUiOptions::refused_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<QString>("message_part");

    QTest::newRow("unknown option") << QStringList{"--bogus"} << "bogus";
    QTest::newRow("missing value") << QStringList{"--screenshot"} << "screenshot";
    QTest::newRow("not a number") << QStringList{"--screenshot", "a.png", "--screenshot-after",
                                                 "soon"}
                                  << "soon";
    QTest::newRow("negative delay")
        << QStringList{"--screenshot", "a.png", "--screenshot-after", "-1"} << "0 to 3600";
    QTest::newRow("delay without file") << QStringList{"--screenshot-after", "1"} << "--screenshot";
    QTest::newRow("two recordings") << QStringList{"a.sqlite", "b.sqlite"} << "b.sqlite";
    QTest::newRow("demo and a recording") << QStringList{"--demo", "a.sqlite"} << "choose one";
    QTest::newRow("no such demo") << QStringList{"--demo", "no-such-demo"} << "hybrid-attention";
    QTest::newRow("record without demo") << QStringList{"--record", "a.sqlite"} << "--demo";
}

void TestUiOptions::refused() {
    QFETCH(QStringList, arguments);
    QFETCH(QString, message_part);

    const auto result = parse_ui_options(QStringList{"kvscope-ui"} + arguments);
    QVERIFY(!result.options.has_value());
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.message.contains(message_part), qPrintable(result.message));
}

void TestUiOptions::help_and_version_exit_zero() {
    const auto help = parse_ui_options({"kvscope-ui", "--help"});
    QVERIFY(!help.options.has_value());
    QCOMPARE(help.exit_code, 0);
    QVERIFY(help.message.contains("--demo"));

    const auto version = parse_ui_options({"kvscope-ui", "--version"});
    QCOMPARE(version.exit_code, 0);
    QVERIFY(version.message.startsWith("kvscope-ui 0."));
}

void TestUiOptions::demo_names_a_teaching_demo() {
    const auto named = parse_ui_options({"kvscope-ui", "--demo", "hybrid-attention"});
    QVERIFY2(named.options.has_value(), qPrintable(named.message));
    QVERIFY(named.options->demo);
    QCOMPARE(named.options->demo_id, QString("hybrid-attention"));
    QVERIFY(named.options->recording_path.isEmpty());
    const auto plain = parse_ui_options({"kvscope-ui", "--demo"});
    QVERIFY(plain.options.has_value());
    QVERIFY(plain.options->demo_id.isEmpty()); // the default demo
    // Without --demo a name is a recording's file name.
    const auto file = parse_ui_options({"kvscope-ui", "paging"});
    QVERIFY(file.options.has_value());
    QCOMPARE(file.options->recording_path, QString("paging"));
    QVERIFY(!file.options->demo);
    const auto help = parse_ui_options({"kvscope-ui", "--help"});
    QVERIFY2(help.message.contains("hybrid-attention"), qPrintable(help.message));
}

QTEST_GUILESS_MAIN(TestUiOptions)
#include "tst_ui_options.moc"
