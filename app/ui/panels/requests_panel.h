// The requests view: a sortable table of the requests at the moment shown,
// and under it the selected request's prompt and the text it had generated
// by then, growing live as tokens arrive.
#pragma once

#include <QString>
#include <QWidget>

class QPlainTextEdit;
class QSortFilterProxyModel;
class QTableView;

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

class RequestsModel;

class RequestsPanel : public QWidget {
    Q_OBJECT
public:
    explicit RequestsPanel(QWidget* parent = nullptr);

    // The run to show (not owned; it must outlive the panel or be replaced
    // first); nullptr empties the panel. Refreshes.
    void set_store(const profiler::RunStore* store);
    // The moment to show; negative follows the end of the run so far (live).
    // Refreshes.
    void set_time_ns(qint64 t_ns);
    qint64 time_ns() const { return time_ns_; }
    // Re-reads the store at the moment shown; call after feeding it events.
    void refresh();

    // The selected request, -1 when none.
    qint64 selected_request() const { return selected_id_; }

    RequestsModel* model() const { return model_; }
    QTableView* table() const { return table_; }
    QPlainTextEdit* text_view() const { return text_; }

public slots:
    // Selects request `id` (-1 clears the selection) and scrolls to it; other
    // views call this to follow a request picked elsewhere.
    void select_request(qint64 id);

signals:
    // The selection changed, by the user or by select_request(); -1: none.
    // Not emitted when it stays the same, so views relaying it to each other
    // do not loop.
    void request_selected(qint64 id);

private:
    qint64 effective_time_ns() const;
    void on_selection_changed();
    void show_text();

    const profiler::RunStore* store_ = nullptr;
    qint64 time_ns_ = -1;
    qint64 selected_id_ = -1;

    RequestsModel* model_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QTableView* table_ = nullptr;
    QPlainTextEdit* text_ = nullptr;

    // What the text view holds, so a live update appends new tokens instead
    // of rewriting the text (which would lose the reader's scroll position).
    qint64 shown_id_ = -1;
    QString shown_prompt_;
    QString shown_output_;
};

} // namespace kvscope::ui
