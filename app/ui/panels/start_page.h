// The page the main window shows before a run starts: which model and which
// compute the app found, and what is missing, so a newcomer sees at once
// whether set-up worked.
#pragma once

#include <QWidget>

class QLabel;

namespace kvscope::ui {

class StartPage : public QWidget {
    Q_OBJECT
public:
    explicit StartPage(QWidget* parent = nullptr);

    // Re-reads the model path and GPU list (they can change between runs).
    void refresh();

    QString model_status_text() const;

private:
    QLabel* model_label_ = nullptr;
    QLabel* compute_label_ = nullptr;
};

} // namespace kvscope::ui
