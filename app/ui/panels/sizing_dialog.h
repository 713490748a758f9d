// Run > Size the KV cache…: kvscope size in the app. The run panel's model
// (its GGUF metadata) or a built-in one, a context, a batch, K and V formats
// and a device's memory; a table of what the cache weighs and what fits for
// the model as MHA, GQA, MQA and MLA, recomputed as any field changes.
#pragma once

#include "engine/kv/kv_sizing.h"

#include <QDialog>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace kvscope::ui {

class SizingDialog : public QDialog {
    Q_OBJECT
public:
    // `model_path`: the run's model ("" for the one setup.sh fetched).
    explicit SizingDialog(const QString& model_path, QWidget* parent = nullptr);

    // Chooses the sized model: index 0 is the run's model, then the built-in ones.
    void choose_model(const QString& name);
    void set_context(int tokens);
    void set_batch(int requests);
    void set_formats(kv::KvFormat key, kv::KvFormat value);
    void set_memory_gib(double gib); // 0: no device memory asked

    QTableWidget* table() const { return table_; }
    QString summary() const; // the line above the table (model, memory budget or problem)

private:
    void recompute();

    QString model_path_;
    QComboBox* model_ = nullptr;
    QSpinBox* context_ = nullptr;
    QSpinBox* batch_ = nullptr;
    QComboBox* key_ = nullptr;
    QComboBox* value_ = nullptr;
    QDoubleSpinBox* memory_ = nullptr;
    QDoubleSpinBox* utilization_ = nullptr;
    QLabel* summary_ = nullptr;
    QTableWidget* table_ = nullptr;
};

} // namespace kvscope::ui
