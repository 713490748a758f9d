// kvscope-ui: the desktop app.
#include "app/ui/export/window_screenshot.h"
#include "app/ui/main_window.h"
#include "app/ui/ui_options.h"
#include "kvscope/build_info.h"

#include <cstdio>

#include <QApplication>
#include <QCoreApplication>
#include <QIcon>
#include <QTimer>

int main(int argc, char** argv) {
    // The command line first, under an application that needs no display:
    // --help, --version and a bad option answer on a machine without one.
    kvscope::ui::UiOptionsResult parsed;
    {
        const QCoreApplication command_line(argc, argv);
        parsed = kvscope::ui::parse_ui_options(QCoreApplication::arguments());
    }
    if (!parsed.options) {
        std::fprintf(parsed.exit_code == 0 ? stdout : stderr, "%s\n", qPrintable(parsed.message));
        return parsed.exit_code;
    }
    const kvscope::ui::UiOptions& options = *parsed.options;

    QApplication application(argc, argv);
    QApplication::setApplicationName("kvscope-ui");
    QApplication::setOrganizationName("kvscope");
    QApplication::setApplicationVersion(kvscope::build_info::version);
    QApplication::setWindowIcon(QIcon(":/kvscope/icons/kvscope.svg"));

    kvscope::ui::MainWindow window;
    window.show();
    if (options.demo) {
        window.start_demo(options.record_path, options.demo_id);
    } else if (!options.recording_path.isEmpty()) {
        // A file that does not open is said on stderr too: the command line
        // asked for it.
        QObject::connect(&window, &kvscope::ui::MainWindow::recording_failed,
                         [](const QString& message) {
                             std::fprintf(stderr, "kvscope-ui: %s\n", qPrintable(message));
                         });
        window.open_recording(options.recording_path);
    }

    if (!options.screenshot_path.isEmpty()) {
        const int delay_ms = static_cast<int>(options.screenshot_after_s * 1000.0);
        QTimer::singleShot(delay_ms, &window, [&window, &options] {
            const QString error = kvscope::ui::save_widget_png(window, options.screenshot_path);
            if (!error.isEmpty()) {
                std::fprintf(stderr, "kvscope-ui: %s\n", qPrintable(error));
                QApplication::exit(1);
                return;
            }
            QApplication::exit(0);
        });
    }
    return QApplication::exec();
}
