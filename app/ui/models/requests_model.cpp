#include "app/ui/models/requests_model.h"

#include "profiler/store/run_store.h"

#include <algorithm>

namespace kvscope::ui {
namespace {

constexpr int kPreviewChars = 60;

// The start of the prompt for a table cell. Pieces are raw bytes and a
// character may span tokens, so decode a growing prefix until it holds
// enough characters rather than cutting bytes.
QString prompt_preview(const profiler::RequestRecord& r) {
    QString text;
    std::int64_t tokens = std::min<std::int64_t>(r.prompt_tokens, kPreviewChars + 4);
    for (;;) {
        text = QString::fromStdString(r.text(0, tokens));
        if (text.size() > kPreviewChars || tokens >= r.prompt_tokens) {
            break;
        }
        tokens = std::min<std::int64_t>(r.prompt_tokens, tokens * 2);
    }
    const bool cut = text.size() > kPreviewChars;
    if (cut) {
        int end = kPreviewChars;
        if (text.at(end - 1).isHighSurrogate()) {
            --end; // never split a surrogate pair
        }
        text.truncate(end);
    }
    text.replace(QLatin1Char('\n'), QStringLiteral(u"⏎"));
    text.replace(QLatin1Char('\r'), QString());
    return cut ? text + QStringLiteral(u"…") : text;
}

QVariant raw_value(const RequestRow& row, int column) {
    switch (column) {
    case RequestsModel::IdColumn:
        return row.id;
    case RequestsModel::StateColumn:
        return row.state;
    case RequestsModel::PromptTokensColumn:
        return row.prompt_tokens;
    case RequestsModel::CachedTokensColumn:
        return row.cached_tokens;
    case RequestsModel::ComputedTokensColumn:
        return row.computed_tokens;
    case RequestsModel::GeneratedColumn:
        return row.generated;
    case RequestsModel::TtftColumn:
        return row.ttft_ms;
    case RequestsModel::TpotColumn:
        return row.tpot_ms;
    case RequestsModel::PreemptionsColumn:
        return row.preemptions;
    case RequestsModel::PromptColumn:
        return row.prompt_preview;
    default:
        return {};
    }
}

QString display_value(const RequestRow& row, int column) {
    switch (column) {
    case RequestsModel::StateColumn:
        return row.state;
    case RequestsModel::CachedTokensColumn:
        return row.cached_tokens < 0 ? QString() : QString::number(row.cached_tokens);
    case RequestsModel::ComputedTokensColumn:
        return row.computed_tokens < 0 ? QString() : QString::number(row.computed_tokens);
    case RequestsModel::TtftColumn:
        return row.ttft_ms < 0 ? QString() : QString::number(row.ttft_ms, 'f', 1);
    case RequestsModel::TpotColumn:
        return row.tpot_ms < 0 ? QString() : QString::number(row.tpot_ms, 'f', 2);
    case RequestsModel::PromptColumn:
        return row.prompt_preview;
    default:
        return QString::number(raw_value(row, column).toLongLong());
    }
}

} // namespace

std::vector<RequestRow> request_rows(const profiler::RunStore& store, qint64 t_ns) {
    std::vector<RequestRow> rows;
    for (const profiler::RequestRecord& r : store.requests()) {
        if (r.arrival_ns < 0 || r.arrival_ns > t_ns) {
            continue;
        }
        RequestRow row;
        row.id = r.id;
        row.state = QString::fromStdString(r.state_at(t_ns));
        row.prompt_tokens = r.prompt_tokens;
        if (r.admitted_ns >= 0 && r.admitted_ns <= t_ns) {
            row.cached_tokens = r.cached_tokens;
            row.computed_tokens = r.computed_tokens;
        }
        const bool ended = r.end_ns >= 0 && r.end_ns <= t_ns;
        const auto known = static_cast<std::size_t>(
            std::upper_bound(r.output_times_ns.begin(), r.output_times_ns.end(), t_ns) -
            r.output_times_ns.begin());
        // Runs without token events only tell the count when the request ends.
        row.generated = !r.output_times_ns.empty() ? static_cast<qint64>(known)
                        : ended                    ? r.generated
                                                   : 0;
        if (r.first_token_ns >= 0 && r.first_token_ns <= t_ns) {
            row.ttft_ms = r.ttft_ms();
        }
        // The same measure as RequestRecord::tpot_ms(), over the tokens so far.
        if (known >= 2) {
            row.tpot_ms =
                static_cast<double>(r.output_times_ns[known - 1] - r.output_times_ns.front()) *
                1e-6 / static_cast<double>(known - 1);
        } else if (ended && r.output_times_ns.empty()) {
            row.tpot_ms = r.tpot_ms();
        }
        row.preemptions = std::count_if(r.lanes.begin(), r.lanes.end(), [&](const auto& lane) {
            return lane.state == profiler::LaneState::preempted && lane.begin_ns <= t_ns;
        });
        row.prompt_preview = prompt_preview(r);
        rows.push_back(std::move(row));
    }
    return rows;
}

RequestsModel::RequestsModel(QObject* parent)
    : TableModel({{tr("Id")},
                  {tr("State"), false},
                  {tr("Prompt tokens")},
                  {tr("Cached tokens")},
                  {tr("Computed")},
                  {tr("Generated")},
                  {tr("TTFT (ms)")},
                  {tr("TPOT (ms)")},
                  {tr("Preemptions")},
                  {tr("Prompt"), false}},
                 parent) {}

void RequestsModel::set_snapshot(std::vector<RequestRow> rows) {
    const int old_count = static_cast<int>(rows_.size());
    const int new_count = static_cast<int>(rows.size());
    const int common = std::min(old_count, new_count);
    const bool aligned =
        std::equal(rows_.begin(), rows_.begin() + common, rows.begin(),
                   [](const RequestRow& a, const RequestRow& b) { return a.id == b.id; });
    if (!aligned) {
        beginResetModel();
        rows_ = std::move(rows);
        endResetModel();
        return;
    }
    if (new_count < old_count) {
        beginRemoveRows({}, new_count, old_count - 1);
        rows_.resize(static_cast<std::size_t>(new_count));
        endRemoveRows();
    }
    std::vector<RequestRow> old_rows(rows_.begin(), rows_.begin() + common);
    std::copy(rows.begin(), rows.begin() + common, rows_.begin());
    announce_changes(old_rows, common);
    if (new_count > old_count) {
        beginInsertRows({}, old_count, new_count - 1);
        rows_.insert(rows_.end(), std::make_move_iterator(rows.begin() + old_count),
                     std::make_move_iterator(rows.end()));
        endInsertRows();
    }
}

// One dataChanged per run of consecutive changed rows, spanning the columns
// that changed in it: few signals, and views repaint only what moved.
void RequestsModel::announce_changes(const std::vector<RequestRow>& old_rows, int common) {
    int first_row = -1;
    int first_column = ColumnCount;
    int last_column = -1;
    const auto flush = [&](int end_row) {
        if (first_row >= 0) {
            emit dataChanged(index(first_row, first_column), index(end_row - 1, last_column),
                             {Qt::DisplayRole, SortRole, Qt::ToolTipRole});
        }
        first_row = -1;
        first_column = ColumnCount;
        last_column = -1;
    };
    for (int row = 0; row < common; ++row) {
        const RequestRow& before = old_rows[static_cast<std::size_t>(row)];
        const RequestRow& after = rows_[static_cast<std::size_t>(row)];
        if (before == after) {
            flush(row);
            continue;
        }
        for (int column = 0; column < ColumnCount; ++column) {
            if (raw_value(before, column) != raw_value(after, column)) {
                first_column = std::min(first_column, column);
                last_column = std::max(last_column, column);
            }
        }
        first_row = first_row < 0 ? row : first_row;
    }
    flush(common);
}

int RequestsModel::row_of(qint64 id) const {
    const auto it = std::find_if(rows_.begin(), rows_.end(),
                                 [id](const RequestRow& row) { return row.id == id; });
    return it == rows_.end() ? -1 : static_cast<int>(it - rows_.begin());
}

QString RequestsModel::display(const RequestRow& row, int column) const {
    return display_value(row, column);
}

QVariant RequestsModel::sort_value(const RequestRow& row, int column) const {
    return raw_value(row, column);
}

QVariant RequestsModel::cell_role(const RequestRow& row, int column, int role) const {
    return role == Qt::ToolTipRole && column == PromptColumn ? QVariant(row.prompt_preview)
                                                             : QVariant();
}

} // namespace kvscope::ui
