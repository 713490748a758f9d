#include "app/ui/main_window.h"

#include "app/ui/start_page.h"
#include "kvscope/build_info.h"

#include <QAction>
#include <QApplication>
#include <QKeySequence>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>

namespace kvscope::ui {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent) {
    setWindowTitle(tr("kvscope"));
    setObjectName("kvscopeMainWindow");
    start_page_ = new StartPage(this);
    setCentralWidget(start_page_);
    create_menus();
    statusBar()->showMessage(tr("Ready"));
    resize(1280, 800);
}

void MainWindow::create_menus() {
    QMenu* file_menu = menuBar()->addMenu(tr("&File"));
    QAction* quit = file_menu->addAction(tr("&Quit"), qApp, &QApplication::quit);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* help_menu = menuBar()->addMenu(tr("&Help"));
    help_menu->addAction(tr("&About kvscope"), this, &MainWindow::show_about);
}

void MainWindow::start_demo() {
    // The engine runs (kvscope generate, kvscope bench) but is not wired to
    // the views yet; say so plainly rather than showing made-up data.
    statusBar()->showMessage(
        tr("Live demo: the views are not connected to the engine yet; meanwhile "
           "'kvscope generate --chat --prompt ...' runs the model from a terminal."));
}

void MainWindow::show_about() {
    QMessageBox::about(this, tr("About kvscope"),
                       tr("<p><b>kvscope %1</b></p><p>A profiler and visualiser of KV-cache "
                          "behaviour in LLM inference.</p><p>Apache License 2.0.</p>")
                           .arg(build_info::version));
}

} // namespace kvscope::ui
