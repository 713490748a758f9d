// "Quality lost": what the run's KV format and eviction policy cost against a
// full f32 cache, measured on an evaluation text in the background
// (quality::measure_kv_quality, as `kvscope eval`), shown beside the memory
// they save. The eviction and quantisation demos measure it when their run
// ends.
#pragma once

#include "app/ui/run/run_settings.h"
#include "app/ui/workers/worker_threads.h"

#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;

namespace kvscope::ui {

class QualityPanel : public QWidget {
    Q_OBJECT
public:
    explicit QualityPanel(QWidget* parent = nullptr);
    ~QualityPanel() override;

    // Tokens of the evaluation text scored (the first `tokens` of it).
    static constexpr int kTokens = 512;

    // Starts measuring `settings`' formats and eviction; a measurement under
    // way is cancelled first.
    void measure(const RunSettings& settings);
    bool measuring() const { return measuring_; }
    // Stops a measurement under way (its result is dropped).
    void cancel();
    QString result_text() const;
    QPushButton* measure_button() const { return button_; }

signals:
    void measure_requested(); // the button: the window answers with measure(settings)
    void measured(const QString& text);
    void failed(const QString& message);

private:
    QLabel* result_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QPushButton* button_ = nullptr;
    bool measuring_ = false;
    int generation_ = 0; // of the latest measure(); older workers' results are dropped
    WorkerThreads workers_;
};

} // namespace kvscope::ui
