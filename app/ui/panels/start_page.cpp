#include "app/ui/panels/start_page.h"

#include "engine/gpu_devices.h"
#include "engine/model_path.h"
#include "kvscope/build_info.h"

#include <QFileInfo>
#include <QFormLayout>
#include <QLabel>
#include <QLocale>
#include <QThread>
#include <QVBoxLayout>

namespace kvscope::ui {

StartPage::StartPage(QWidget* parent)
    : QWidget(parent) {
    auto* title = new QLabel(tr("<h1>kvscope</h1>"
                                "<p>See how LLM inference uses its KV cache: page occupancy, "
                                "prefix hits and the prefill/decode timeline, live or replayed "
                                "from a recording.</p>"),
                             this);
    title->setWordWrap(true);

    model_label_ = new QLabel(this);
    model_label_->setObjectName("modelStatus");
    model_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    model_label_->setWordWrap(true);
    compute_label_ = new QLabel(this);
    compute_label_->setObjectName("computeStatus");
    compute_label_->setWordWrap(true);

    auto* form = new QFormLayout;
    form->addRow(tr("Model:"), model_label_);
    form->addRow(tr("Compute:"), compute_label_);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(title);
    layout->addLayout(form);
    layout->addStretch(1);
    refresh();
}

void StartPage::refresh() {
    const ModelPath model = resolve_model_path();
    const std::string problem = model_path_problem(model);
    if (problem.empty()) {
        const QFileInfo info(QString::fromStdString(model.path.string()));
        model_label_->setText(
            tr("%1 (%2)%3")
                .arg(info.absoluteFilePath(), QLocale().formattedDataSize(info.size()),
                     model.from_environment ? tr(", from KVSCOPE_MODEL") : QString()));
    } else {
        model_label_->setText(
            QString::fromStdString(problem).toHtmlEscaped().replace("\n", "<br>"));
    }

    QString compute = tr("CPU, %1 threads").arg(QThread::idealThreadCount());
    const GpuInventory gpus = query_gpu_devices();
    if (gpus.devices.empty()) {
        compute += tr("; no GPU (%1)").arg(QString::fromStdString(gpus.unavailable_reason));
    }
    for (const GpuDevice& gpu : gpus.devices) {
        compute +=
            tr("; GPU %1: %2 (sm_%3%4, %5)")
                .arg(gpu.index)
                .arg(QString::fromStdString(gpu.name))
                .arg(gpu.compute_major)
                .arg(gpu.compute_minor)
                .arg(QLocale().formattedDataSize(static_cast<qint64>(gpu.total_memory_bytes)));
    }
    compute_label_->setText(compute);
}

QString StartPage::model_status_text() const {
    return model_label_->text();
}

} // namespace kvscope::ui
