// kvscope-ui's main window: menus, status bar and the central views.
#pragma once

#include <QMainWindow>

namespace kvscope::ui {

class StartPage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);

    StartPage* start_page() const { return start_page_; }

    // Starts the default live demo (kvscope-ui --demo).
    void start_demo();

private:
    void create_menus();
    void show_about();

    StartPage* start_page_ = nullptr;
};

} // namespace kvscope::ui
