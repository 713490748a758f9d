#include "app/ui/export/plot_export.h"

#include "app/ui/export/window_screenshot.h"

#include <QAction>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QPainter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QWidget>

namespace kvscope::ui {
namespace {

QString export_svg(QWidget& widget, const QString& path) {
    // Like the PNG path: a temporary file renamed on commit, so a failed
    // export never leaves a truncated file behind.
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) {
        return QString("cannot write %1: %2").arg(path, file.errorString());
    }
    QSvgGenerator generator;
    generator.setOutputDevice(&file);
    generator.setSize(widget.size());
    generator.setViewBox(QRect(QPoint(0, 0), widget.size()));
    generator.setTitle(widget.windowTitle().isEmpty() ? QString("kvscope plot")
                                                      : widget.windowTitle());
    generator.setDescription("Exported by kvscope");
    QPainter painter;
    if (!painter.begin(&generator)) {
        file.cancelWriting();
        return QString("cannot render %1 as SVG").arg(path);
    }
    widget.render(&painter);
    painter.end();
    if (!file.commit()) {
        return QString("cannot write %1: %2").arg(path, file.errorString());
    }
    return {};
}

// Where the last export went, so a series of exports lands together.
QString& last_export_dir() {
    static QString dir = QDir::homePath();
    return dir;
}

} // namespace

QString export_action_text() {
    return QString("Export as PNG or SVG\u2026");
}

QString export_widget(QWidget& widget, const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == "png") {
        return save_widget_png(widget, path);
    }
    if (suffix == "svg") {
        return export_svg(widget, path);
    }
    return QString("cannot export %1: use a .png or .svg file name").arg(path);
}

void add_export_menu(QWidget* widget) {
    auto* action = new QAction(export_action_text(), widget);
    QObject::connect(action, &QAction::triggered, widget, [widget] {
        const QString png_filter = "PNG image (*.png)";
        const QString svg_filter = "SVG image (*.svg)";
        QString filter = png_filter;
        const QString name =
            widget->objectName().isEmpty() ? QString("plot") : widget->objectName();
        QString path = QFileDialog::getSaveFileName(widget, "Export plot",
                                                    QDir(last_export_dir()).filePath(name + ".png"),
                                                    png_filter + ";;" + svg_filter, &filter);
        if (path.isEmpty()) {
            return;
        }
        if (QFileInfo(path).suffix().isEmpty()) {
            path += filter == svg_filter ? ".svg" : ".png";
        }
        last_export_dir() = QFileInfo(path).absolutePath();
        const QString error = export_widget(*widget, path);
        if (!error.isEmpty()) {
            QMessageBox::warning(widget, "Export failed", error);
        }
    });
    widget->addAction(action);
    widget->setContextMenuPolicy(Qt::ActionsContextMenu);
}

} // namespace kvscope::ui
