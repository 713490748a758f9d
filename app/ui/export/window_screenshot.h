// Renders a widget (normally the main window) to a PNG file, for the docs'
// screenshots and for the tests.
#pragma once

#include <QString>

class QWidget;

namespace kvscope::ui {

// Empty on success, else a message naming the file and the problem.
QString save_widget_png(QWidget& widget, const QString& path);

} // namespace kvscope::ui
