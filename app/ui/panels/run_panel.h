// The run panel: every setting of a live run (model, backend, KV-cache
// geometry and formats, eviction, prefix caching, scheduler, workload,
// recording), the teaching presets with their explanations, and Start,
// Pause, Stop with the run's progress.
#pragma once

#include "app/ui/run/run_settings.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTextBrowser;

namespace kvscope::ui {

class QualityPanel;

class RunPanel : public QWidget {
    Q_OBJECT
public:
    explicit RunPanel(QWidget* parent = nullptr);

    RunSettings settings() const;
    void apply_settings(const RunSettings& settings);
    // Fills in a teaching preset's settings and shows its explanation.
    void choose_preset(const QString& id);
    // The explanation box about what the window shows when it is not a run
    // of these settings (attached engines, live or replayed); the next demo
    // chosen or run started brings the demo's text back (explain_preset).
    void explain_other(const QString& title, const QString& html);
    void explain_preset();
    QString explanation_text() const;

    // `pausable`: the live source can pause (an attach cannot: engines
    // elsewhere do not wait for us).
    void set_running(bool running, bool pausable = true);
    void set_paused(bool paused);
    void set_loading(bool loading);
    void set_progress(int done, int total);
    void set_status(const QString& text);
    // After a recorded run: the record path moves on to a name no file has
    // ("run.sqlite" -> "run-2.sqlite"), so recording again never overwrites.
    void advance_record_path();

    QPushButton* start_button() const { return start_; }
    QPushButton* pause_button() const { return pause_; }
    QPushButton* stop_button() const { return stop_; }
    QualityPanel* quality() const { return quality_; }

signals:
    void start_requested();
    void pause_toggled(bool paused);
    void stop_requested();

private:
    enum class CacheUnit { blocks, mebibytes, tokens, percent_of_memory };
    QWidget* build_engine_group();
    QWidget* build_workload_group();
    void browse_model();
    void browse_recording();
    void update_eviction_enabled();
    void update_speculative_enabled();
    void update_offload_enabled();
    void update_hybrid_enabled();

    QComboBox* preset_ = nullptr;
    QTextBrowser* explanation_ = nullptr;
    QualityPanel* quality_ = nullptr;
    QLineEdit* model_ = nullptr;
    QComboBox* backend_ = nullptr;
    QSpinBox* threads_ = nullptr;
    QSpinBox* block_size_ = nullptr;
    QSpinBox* cache_size_ = nullptr;
    QComboBox* cache_unit_ = nullptr;
    QComboBox* key_format_ = nullptr;
    QComboBox* value_format_ = nullptr;
    QComboBox* eviction_ = nullptr;
    QSpinBox* kv_budget_ = nullptr;
    QCheckBox* hybrid_kv_ = nullptr;
    QString hybrid_tooltip_;
    QCheckBox* prefix_caching_ = nullptr;
    QComboBox* cache_policy_ = nullptr;
    QComboBox* speculative_ = nullptr;
    QSpinBox* draft_tokens_ = nullptr;
    QSpinBox* draft_layers_ = nullptr;
    QComboBox* offload_tier_ = nullptr;
    QSpinBox* offload_blocks_ = nullptr;
    QCheckBox* write_through_ = nullptr;
    QSpinBox* max_seqs_ = nullptr;
    QSpinBox* max_batched_tokens_ = nullptr;
    QComboBox* workload_ = nullptr;
    QSpinBox* requests_ = nullptr;
    QDoubleSpinBox* rate_ = nullptr;
    QSpinBox* max_tokens_ = nullptr;
    QSpinBox* seed_ = nullptr;
    QCheckBox* record_ = nullptr;
    QLineEdit* record_path_ = nullptr;
    QPushButton* start_ = nullptr;
    QPushButton* pause_ = nullptr;
    QPushButton* stop_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* status_ = nullptr;
};

} // namespace kvscope::ui
