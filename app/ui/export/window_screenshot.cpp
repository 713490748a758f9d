#include "app/ui/export/window_screenshot.h"

#include <QFileInfo>
#include <QImageWriter>
#include <QPixmap>
#include <QSaveFile>
#include <QWidget>

namespace kvscope::ui {

QString save_widget_png(QWidget& widget, const QString& path) {
    const QPixmap pixmap = widget.grab();
    if (pixmap.isNull()) {
        return QString("could not render the window for %1").arg(path);
    }
    // QSaveFile writes a temporary file and renames it on commit, so a
    // failed write never leaves a truncated PNG behind.
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) {
        return QString("cannot write %1: %2").arg(path, file.errorString());
    }
    QImageWriter writer(&file, "png");
    if (!writer.write(pixmap.toImage())) {
        file.cancelWriting();
        return QString("cannot encode %1 as PNG: %2").arg(path, writer.errorString());
    }
    if (!file.commit()) {
        return QString("cannot write %1: %2").arg(path, file.errorString());
    }
    return {};
}

} // namespace kvscope::ui
