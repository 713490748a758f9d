// kvscope-ui as a user starts it: --screenshot renders the real window and
// exits; bad command lines exit with status 2 and a message; --help and
// --version answer without a display.
#include "tests/support/run_process.h"

#include <QImage>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

class TestUiCommand : public QObject {
    Q_OBJECT

private slots:
    void demo_screenshot_renders_window();
    void bad_option_exits_two();
    void version_prints();
    void help_and_version_need_no_display();
};

namespace {
QProcessEnvironment offscreen() {
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("QT_QPA_PLATFORM", "offscreen");
    return environment;
}
} // namespace

void TestUiCommand::demo_screenshot_renders_window() {
    QTemporaryDir dir;
    const QString png = dir.filePath("demo.png");
    const auto result = run_process(
        KVSCOPE_UI_PATH, {"--demo", "--screenshot", png, "--screenshot-after", "0.2"}, offscreen());
    QVERIFY2(result.finished, "kvscope-ui did not exit after its screenshot");
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    const QImage image(png);
    QVERIFY2(!image.isNull(), qPrintable(result.err));
    QVERIFY(image.width() >= 640 && image.height() >= 400);
}

void TestUiCommand::bad_option_exits_two() {
    const auto result = run_process(KVSCOPE_UI_PATH, {"--no-such-option"}, offscreen());
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.err.contains("no-such-option"), qPrintable(result.err));
}

void TestUiCommand::version_prints() {
    const auto result = run_process(KVSCOPE_UI_PATH, {"--version"}, offscreen());
    QCOMPARE(result.exit_code, 0);
    QVERIFY(result.out.startsWith("kvscope-ui 0."));
}

void TestUiCommand::help_and_version_need_no_display() {
    // A machine without a display: the X11 platform and nowhere to connect.
    // The app itself could not start there; its command line still answers.
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("QT_QPA_PLATFORM", "xcb");
    environment.remove("DISPLAY");
    environment.remove("WAYLAND_DISPLAY");
    const auto help = run_process(KVSCOPE_UI_PATH, {"--help"}, environment);
    QCOMPARE(help.exit_code, 0);
    QVERIFY2(help.out.contains("Usage:") && help.out.contains("--demo"), qPrintable(help.err));
    const auto version = run_process(KVSCOPE_UI_PATH, {"--version"}, environment);
    QCOMPARE(version.exit_code, 0);
    QVERIFY(version.out.startsWith("kvscope-ui 0."));
    const auto bad = run_process(KVSCOPE_UI_PATH, {"--demo", "no-such-demo"}, environment);
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.err.contains("No demo called"), qPrintable(bad.err));
}

QTEST_GUILESS_MAIN(TestUiCommand)
#include "tst_ui_command.moc"
