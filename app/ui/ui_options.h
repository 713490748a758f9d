// The kvscope-ui command line, parsed apart from main() so it can be tested.
#pragma once

#include <optional>

#include <QString>
#include <QStringList>

namespace kvscope::ui {

struct UiOptions {
    bool demo = false;       // start a live demo at once
    QString demo_id;         // which teaching demo (teaching_presets.h); empty: the default
    QString record_path;     // with demo: record the live run into this file
    QString screenshot_path; // render the main window to this PNG, then exit
    double screenshot_after_s = 2.0;
    QString recording_path; // open this recording for replay
};

struct UiOptionsResult {
    std::optional<UiOptions> options; // empty: print `message` and exit with `exit_code`
    QString message;
    int exit_code = 0;
};

// `arguments` includes the program name, as QCoreApplication::arguments() does.
UiOptionsResult parse_ui_options(const QStringList& arguments);

} // namespace kvscope::ui
