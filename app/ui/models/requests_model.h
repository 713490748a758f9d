// The requests table: one row per request that has arrived by the moment
// shown, with what was known of it then (state, cache hits, tokens so far,
// TTFT/TPOT once measurable). Fed by value snapshots that it diffs against
// what it shows, so live updates ten times a second insert rows and change
// cells instead of resetting, and the view's selection and scroll survive.
#pragma once

#include "app/ui/models/table_model.h"

#include <vector>

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

class RequestsModel : public TableModel<RequestRow> {
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
    explicit RequestsModel(QObject* parent = nullptr);

    // Replaces the rows with `rows`, announcing only what changed: appended
    // rows are inserted, dropped trailing rows removed (scrubbing back),
    // changed cells reported; a reset only when the ids no longer line up.
    void set_snapshot(std::vector<RequestRow> rows);
    // The row of request `id`, -1 when it is not shown.
    int row_of(qint64 id) const;

private:
    QString display(const RequestRow& row, int column) const override;
    QVariant sort_value(const RequestRow& row, int column) const override;
    QVariant cell_role(const RequestRow& row, int column, int role) const override;
    void announce_changes(const std::vector<RequestRow>& old_rows, int common);
};

} // namespace kvscope::ui
