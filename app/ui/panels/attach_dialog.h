// File > Attach to engine…: the publishers to watch (one per line, endpoint
// and optional replay endpoint), the topic, the engines' capacity, and an
// optional recording; the endpoints used before are offered again (kept with
// QSettings, most recent first).
#pragma once

#include "app/ui/run/attach_controller.h"

#include <QDialog>

class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;

namespace kvscope::ui {

class AttachDialog : public QDialog {
    Q_OBJECT
public:
    explicit AttachDialog(QWidget* parent = nullptr);

    AttachSettings settings() const { return settings_; }
    void set_lines(const QStringList& lines);
    QPlainTextEdit* publishers() const { return publishers_; }
    QListWidget* recent() const { return recent_; }

    // The endpoint lines used before, most recent first.
    static QStringList recent_lines();
    static void remember(const QStringList& lines);
    static constexpr int kRecentKept = 12;

    void accept() override; // validates; stays open with the reason when wrong

private:
    QPlainTextEdit* publishers_ = nullptr;
    QListWidget* recent_ = nullptr;
    QLineEdit* topic_ = nullptr;
    QSpinBox* block_size_ = nullptr;
    QSpinBox* num_blocks_ = nullptr;
    QLineEdit* record_path_ = nullptr;
    QLineEdit* tokenizer_path_ = nullptr;
    QLabel* problem_ = nullptr;
    AttachSettings settings_;
};

} // namespace kvscope::ui
