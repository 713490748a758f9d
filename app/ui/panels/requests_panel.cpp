#include "app/ui/panels/requests_panel.h"

#include "app/ui/models/requests_model.h"
#include "profiler/store/run_store.h"

#include <QFont>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QPlainTextEdit>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QVBoxLayout>

namespace kvscope::ui {

RequestsPanel::RequestsPanel(QWidget* parent)
    : QWidget(parent) {
    model_ = new RequestsModel(this);
    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(model_);
    proxy_->setSortRole(RequestsModel::SortRole);

    table_ = new QTableView(this);
    table_->setObjectName("requestsTable");
    table_->setModel(proxy_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setSortingEnabled(true);
    table_->sortByColumn(RequestsModel::IdColumn, Qt::AscendingOrder);
    table_->setWordWrap(false);
    table_->verticalHeader()->hide();
    // Widths fitted once when rows first appear, not on every live update:
    // columns that jumped as numbers grew would be hard to read.
    table_->horizontalHeader()->setStretchLastSection(true);
    connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &RequestsPanel::on_selection_changed);

    text_ = new QPlainTextEdit(this);
    text_->setObjectName("requestText");
    text_->setReadOnly(true);
    text_->setPlaceholderText(tr("Select a request to see its prompt and output."));

    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(table_);
    splitter->addWidget(text_);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(splitter);
}

void RequestsPanel::set_store(const profiler::RunStore* store) {
    store_ = store;
    shown_id_ = -1; // another run: never append to the old one's text
    refresh();
}

void RequestsPanel::set_time_ns(qint64 t_ns) {
    time_ns_ = t_ns;
    refresh();
}

qint64 RequestsPanel::effective_time_ns() const {
    if (time_ns_ >= 0 || store_ == nullptr) {
        return time_ns_;
    }
    return store_->end_ns();
}

void RequestsPanel::refresh() {
    const bool was_empty = model_->rowCount() == 0;
    model_->set_snapshot(store_ != nullptr ? request_rows(*store_, effective_time_ns())
                                           : std::vector<RequestRow>{});
    if (was_empty && model_->rowCount() > 0) {
        table_->resizeColumnsToContents();
    }
    show_text();
}

void RequestsPanel::select_request(qint64 id) {
    if (id == selected_id_) {
        return;
    }
    const int row = model_->row_of(id);
    if (row < 0) {
        table_->selectionModel()->clearSelection();
        return;
    }
    const QModelIndex index = proxy_->mapFromSource(model_->index(row, 0));
    table_->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect |
                                                         QItemSelectionModel::Rows);
    table_->scrollTo(index);
}

void RequestsPanel::on_selection_changed() {
    const QModelIndexList rows = table_->selectionModel()->selectedRows();
    qint64 id = -1;
    if (!rows.isEmpty()) {
        const QModelIndex source = proxy_->mapToSource(rows.first());
        id = model_->rows()[static_cast<std::size_t>(source.row())].id;
    }
    if (id == selected_id_) {
        return;
    }
    selected_id_ = id;
    show_text();
    emit request_selected(id);
}

void RequestsPanel::show_text() {
    const profiler::RequestRecord* r =
        store_ != nullptr && selected_id_ >= 0 ? store_->request(selected_id_) : nullptr;
    if (r == nullptr) {
        text_->clear();
        shown_id_ = -1;
        return;
    }
    const QString prompt = QString::fromStdString(r->text(0, r->prompt_tokens));
    const QString output = QString::fromStdString(r->output_text(effective_time_ns()));

    QTextCharFormat body;
    QTextCharFormat dimmed;
    dimmed.setForeground(palette().color(QPalette::PlaceholderText));
    QTextCharFormat header;
    header.setFontWeight(QFont::Bold);

    QTextCursor cursor(text_->document());
    cursor.movePosition(QTextCursor::End);
    if (shown_id_ == r->id && shown_prompt_ == prompt && output.startsWith(shown_output_)) {
        if (output.size() > shown_output_.size()) {
            cursor.insertText(output.mid(shown_output_.size()), body);
            shown_output_ = output;
        }
        return;
    }
    text_->clear();
    cursor = QTextCursor(text_->document());
    cursor.insertText(tr("Prompt (%1 tokens)\n").arg(r->prompt_tokens), header);
    cursor.insertText(prompt.isEmpty() ? tr("(this run recorded no text)") : prompt, dimmed);
    cursor.insertText(tr("\n\nOutput\n"), header);
    cursor.insertText(output, body);
    shown_id_ = r->id;
    shown_prompt_ = prompt;
    shown_output_ = output;
}

} // namespace kvscope::ui
