// The main window opens, says which model it found, and renders to PNG.
#include "app/ui/export/window_screenshot.h"
#include "app/ui/main_window.h"
#include "app/ui/panels/start_page.h"

#include <QFile>
#include <QImage>
#include <QLabel>
#include <QMenuBar>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>

class TestMainWindow : public QObject {
    Q_OBJECT

private slots:
    void init();
    void cleanup();
    void opens_with_menus_and_title();
    void start_page_reports_missing_model();
    void start_page_reports_model_in_place();
    void demo_says_what_it_runs();
    void screenshot_writes_png_of_window_size();
    void screenshot_to_unwritable_path_fails_cleanly();

private:
    QByteArray saved_model_;
};

void TestMainWindow::init() {
    saved_model_ = qgetenv("KVSCOPE_MODEL");
}

void TestMainWindow::cleanup() {
    saved_model_.isNull() ? qunsetenv("KVSCOPE_MODEL") : qputenv("KVSCOPE_MODEL", saved_model_);
}

void TestMainWindow::opens_with_menus_and_title() {
    kvscope::ui::MainWindow window;
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QCOMPARE(window.windowTitle(), QString("kvscope"));
    QStringList menus;
    for (QAction* action : window.menuBar()->actions()) {
        menus << action->text();
    }
    QCOMPARE(menus, (QStringList{"&File", "&Run", "&Help"}));
}

void TestMainWindow::start_page_reports_missing_model() {
    QTemporaryDir dir;
    qputenv("KVSCOPE_MODEL", dir.filePath("absent.gguf").toUtf8());
    kvscope::ui::MainWindow window;
    const QString text = window.start_page()->model_status_text();
    QVERIFY2(text.contains("not found") && text.contains("absent.gguf"), qPrintable(text));
}

void TestMainWindow::start_page_reports_model_in_place() {
    QTemporaryDir dir;
    const QString path = dir.filePath("tiny.gguf");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray(2048, 'x'));
    file.close();
    qputenv("KVSCOPE_MODEL", path.toUtf8());
    kvscope::ui::MainWindow window;
    const QString text = window.start_page()->model_status_text();
    QVERIFY2(text.contains("tiny.gguf") && text.contains("KVSCOPE_MODEL"), qPrintable(text));
    QVERIFY2(!text.contains("not found"), qPrintable(text));
}

void TestMainWindow::demo_says_what_it_runs() {
    kvscope::ui::MainWindow window;
    window.show();
    window.start_demo();
    QVERIFY(window.statusBar()->currentMessage().startsWith("Live demo"));
}

void TestMainWindow::screenshot_writes_png_of_window_size() {
    kvscope::ui::MainWindow window;
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTemporaryDir dir;
    const QString path = dir.filePath("window.png");
    QCOMPARE(kvscope::ui::save_widget_png(window, path), QString());
    const QImage image(path);
    QVERIFY(!image.isNull());
    QCOMPARE(image.size(), window.size() * window.devicePixelRatio());
    // Something was drawn: the page is not a single flat colour.
    const QRgb corner = image.pixel(0, 0);
    bool varied = false;
    for (int y = 0; y < image.height() && !varied; y += 7) {
        for (int x = 0; x < image.width() && !varied; x += 7) {
            varied = image.pixel(x, y) != corner;
        }
    }
    QVERIFY(varied);
}

void TestMainWindow::screenshot_to_unwritable_path_fails_cleanly() {
    kvscope::ui::MainWindow window;
    window.show();
    const QString path = "/nonexistent-dir/for/kvscope/window.png";
    const QString error = kvscope::ui::save_widget_png(window, path);
    QVERIFY2(error.contains(path), qPrintable(error));
    QVERIFY(!QFile::exists(path));
}

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
