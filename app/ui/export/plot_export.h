// Saving a view as an image for slides and reports: PNG (pixels, as on
// screen) or SVG (vectors, sharp at any size), chosen by the file's suffix.
#pragma once

#include <QString>

class QWidget;

namespace kvscope::ui {

// Writes `widget` to `path` as PNG or SVG by its suffix. Empty on success,
// else a message naming the file and the problem; never throws.
QString export_widget(QWidget& widget, const QString& path);

// Gives `widget` a context-menu action "Export as PNG or SVG…" that asks for
// a file and exports it there (errors in a message box).
void add_export_menu(QWidget* widget);

// The context-menu action's text, for callers and tests that look it up.
QString export_action_text();

} // namespace kvscope::ui
