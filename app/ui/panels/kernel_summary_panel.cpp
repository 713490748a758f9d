#include "app/ui/panels/kernel_summary_panel.h"

#include "app/ui/models/kernel_summary_model.h"
#include "profiler/store/run_store.h"

#include <QHeaderView>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

namespace kvscope::ui {

KernelSummaryPanel::KernelSummaryPanel(QWidget* parent)
    : QWidget(parent) {
    model_ = new KernelSummaryModel(this);
    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(model_);
    proxy_->setSortRole(KernelSummaryModel::SortRole);

    table_ = new QTableView(this);
    table_->setObjectName("kernelSummaryTable");
    table_->setModel(proxy_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSortingEnabled(true);
    table_->sortByColumn(KernelSummaryModel::TotalColumn, Qt::DescendingOrder);
    table_->setWordWrap(false);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setStretchLastSection(true);

    pending_ = new QTimer(this);
    pending_->setSingleShot(true);
    connect(pending_, &QTimer::timeout, this, &KernelSummaryPanel::recompute);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(table_);
}

void KernelSummaryPanel::set_store(const profiler::RunStore* store) {
    store_ = store;
    recompute();
}

void KernelSummaryPanel::set_time_ns(qint64 t_ns) {
    time_ns_ = t_ns;
    refresh();
}

void KernelSummaryPanel::refresh() {
    if (!since_recompute_.isValid() || since_recompute_.elapsed() >= kMinInterval_ms) {
        recompute();
    } else if (!pending_->isActive()) {
        pending_->start(static_cast<int>(kMinInterval_ms - since_recompute_.elapsed()));
    }
}

void KernelSummaryPanel::recompute() {
    pending_->stop();
    since_recompute_.start();
    if (store_ == nullptr) {
        model_->set_rows({});
        return;
    }
    const bool was_empty = model_->rowCount() == 0;
    model_->set_rows(kernel_summary_rows(live_time_summaries(*store_, time_ns_)));
    // Widths fitted once, not on every update, so columns do not jump.
    if (was_empty && model_->rowCount() > 0) {
        table_->resizeColumnsToContents();
    }
}

} // namespace kvscope::ui
