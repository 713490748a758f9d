// The requests table: one row per request that has arrived by the moment
// shown, with what was known of it then (state, cache hits, tokens so far,
// TTFT/TPOT once measurable). Fed by value snapshots that it diffs against
// what it shows, so live updates ten times a second insert rows and change
// cells instead of resetting, and the view's selection and scroll survive.
#pragma once

#include <vector>

#include <QAbstractTableModel>
#include <QString>

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

// One request as seen at one moment; -1 in a number means "not known yet".
struct RequestRow {
    qint64 id = -1;
    QString state;
    qint64 prompt_tokens = 0;
    qint64 cached_tokens = -1;   // prefix-cache hit at first admission
    qint64 computed_tokens = -1; // prompt tokens computed at first admission
    qint64 generated = 0;
    double ttft_ms = -1;
    double tpot_ms = -1;
    qint64 preemptions = 0;
    QString prompt_preview; // first ~60 characters, newlines as ⏎

    bool operator==(const RequestRow&) const = default;
};

// The requests that arrived by `t_ns`, in arrival order, as they stood then.
std::vector<RequestRow> request_rows(const profiler::RunStore& store, qint64 t_ns);

class RequestsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        IdColumn,
        StateColumn,
        PromptTokensColumn,
        CachedTokensColumn,
        ComputedTokensColumn,
        GeneratedColumn,
        TtftColumn,
        TpotColumn,
        PreemptionsColumn,
        PromptColumn,
        ColumnCount
    };
    // Raw values (numbers, not text) for sorting: use with a proxy's sortRole.
    static constexpr int SortRole = Qt::UserRole;

    explicit RequestsModel(QObject* parent = nullptr);

    // Replaces the rows with `rows`, announcing only what changed: appended
    // rows are inserted, dropped trailing rows removed (scrubbing back),
    // changed cells reported; a reset only when the ids no longer line up.
    void set_snapshot(std::vector<RequestRow> rows);
    const std::vector<RequestRow>& rows() const { return rows_; }
    // The row of request `id`, -1 when it is not shown.
    int row_of(qint64 id) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    void announce_changes(const std::vector<RequestRow>& old_rows, int common);

    std::vector<RequestRow> rows_;
};

} // namespace kvscope::ui
