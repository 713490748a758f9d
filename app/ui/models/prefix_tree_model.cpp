#include "app/ui/models/prefix_tree_model.h"

#include <algorithm>
#include <map>
#include <optional>

#include <QColor>

namespace kvscope::ui {
namespace {

constexpr int kTooltipChars = 400;

QString shown_text(QString text) {
    // A newline would make the row taller than its neighbours.
    text.replace('\n', QChar(0x23CE));
    return text;
}

double seconds(std::int64_t from_ns, std::int64_t to_ns) {
    return static_cast<double>(to_ns - from_ns) * 1e-9;
}

} // namespace

PrefixTreeSnapshot prefix_tree_snapshot(const profiler::RunStore& store, std::int64_t time_ns,
                                        const PrefixTreeSnapshot* previous) {
    PrefixTreeSnapshot snapshot;
    snapshot.nodes = store.prefix_nodes();
    snapshot.start_ns = store.start_ns();
    snapshot.time_ns = time_ns;
    snapshot.block_size = store.block_size();
    snapshot.texts.resize(snapshot.nodes.size());

    // A node's own count is its final one; while its block is still cached
    // at `time_ns`, the block map of that moment has the count then.
    std::optional<profiler::BlockMapState> past;
    if (time_ns < store.end_ns() && !snapshot.nodes.empty()) {
        past = store.block_map_at(time_ns);
    }
    const profiler::BlockMapState& state = past ? *past : store.block_map_now();
    const auto block_size = static_cast<std::int64_t>(store.block_size());

    for (std::size_t i = 0; i < snapshot.nodes.size(); ++i) {
        profiler::PrefixNode& node = snapshot.nodes[i];
        if (node.cached_ns > time_ns) {
            continue; // not shown
        }
        const bool evicted = node.evicted_ns >= 0 && node.evicted_ns <= time_ns;
        const auto block = static_cast<std::size_t>(node.block);
        if (!evicted && node.block >= 0 && block < state.blocks().size()) {
            const profiler::BlockState& b = state.blocks()[block];
            if (b.hashed && b.hash == node.hash) {
                node.reuses = b.reuses;
            }
        }
        const bool same_node = previous != nullptr && i < previous->nodes.size() &&
                               previous->nodes[i].cached_by == node.cached_by &&
                               previous->nodes[i].first_token == node.first_token &&
                               previous->nodes[i].cached_ns == node.cached_ns;
        if (same_node && i < previous->texts.size() && !previous->texts[i].isEmpty()) {
            snapshot.texts[i] = previous->texts[i];
        } else if (const profiler::RequestRecord* r = store.request(node.cached_by)) {
            snapshot.texts[i] =
                QString::fromStdString(r->text(node.first_token, node.first_token + block_size));
        }
    }
    return snapshot;
}

PrefixTreeModel::PrefixTreeModel(QObject* parent)
    : QAbstractItemModel(parent)
    , columns_(
          {{"Prefix text", false}, {"Block"}, {"Reuses"}, {"Cached at (s)"}, {"Status", false}}) {}

PrefixTreeModel::Layout PrefixTreeModel::layout_of(const PrefixTreeSnapshot& snapshot) {
    Layout layout;
    const std::size_t n = snapshot.nodes.size();
    layout.children.resize(n);
    layout.row.assign(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
        const profiler::PrefixNode& node = snapshot.nodes[i];
        if (node.cached_ns > snapshot.time_ns) {
            continue;
        }
        // A parent is always an earlier node; anything else is malformed and
        // left out rather than risk a cycle.
        const std::int32_t parent = node.parent;
        if (parent >= 0 && (static_cast<std::size_t>(parent) >= i ||
                            layout.row[static_cast<std::size_t>(parent)] < 0)) {
            continue;
        }
        std::vector<std::int32_t>& list =
            parent < 0 ? layout.roots : layout.children[static_cast<std::size_t>(parent)];
        layout.row[i] = static_cast<int>(list.size());
        list.push_back(static_cast<std::int32_t>(i));
        ++layout.shown;
    }
    return layout;
}

bool PrefixTreeModel::only_adds(const PrefixTreeSnapshot& next, const Layout& next_layout) const {
    const std::size_t old_count = snapshot_.nodes.size();
    // Times and token ranges count from these: every row would change.
    if (next.start_ns != snapshot_.start_ns || next.block_size != snapshot_.block_size) {
        return false;
    }
    if (next.nodes.size() < old_count) {
        return false;
    }
    const auto starts_with = [](const std::vector<std::int32_t>& list,
                                const std::vector<std::int32_t>& prefix) {
        return list.size() >= prefix.size() &&
               std::equal(prefix.begin(), prefix.end(), list.begin());
    };
    if (!starts_with(next_layout.roots, layout_.roots)) {
        return false;
    }
    for (std::size_t i = 0; i < old_count; ++i) {
        if (next.nodes[i].parent != snapshot_.nodes[i].parent) {
            return false;
        }
        if (layout_.row[i] >= 0 && (next_layout.row[i] < 0 ||
                                    !starts_with(next_layout.children[i], layout_.children[i]))) {
            return false;
        }
    }
    return true;
}

void PrefixTreeModel::set_snapshot(PrefixTreeSnapshot snapshot) {
    Layout next_layout = layout_of(snapshot);
    // Nothing shown yet means no expansion state to keep: one reset is
    // cheaper than many insertions.
    if (layout_.shown == 0 || !only_adds(snapshot, next_layout)) {
        beginResetModel();
        snapshot_ = std::move(snapshot);
        layout_ = std::move(next_layout);
        endResetModel();
        return;
    }

    // Rows already shown whose cells change: hits, eviction, text.
    std::vector<std::int32_t> changed;
    for (std::size_t i = 0; i < snapshot_.nodes.size(); ++i) {
        if (layout_.row[i] < 0) {
            continue;
        }
        const profiler::PrefixNode& before = snapshot_.nodes[i];
        const profiler::PrefixNode& after = snapshot.nodes[i];
        const bool was_evicted = evicted(before);
        const bool is_evicted = after.evicted_ns >= 0 && after.evicted_ns <= snapshot.time_ns;
        if (was_evicted != is_evicted || (is_evicted && before.evicted_ns != after.evicted_ns) ||
            before.reuses != after.reuses || before.block != after.block ||
            before.cached_ns != after.cached_ns || snapshot_.texts[i] != snapshot.texts[i]) {
            changed.push_back(static_cast<std::int32_t>(i));
        }
    }

    // New rows, grouped by parent: a parent is an earlier node, so taking the
    // groups in parent order inserts every parent before its children.
    std::map<std::int32_t, std::vector<std::int32_t>> added;
    for (std::size_t i = 0; i < snapshot.nodes.size(); ++i) {
        const bool was_shown = i < layout_.row.size() && layout_.row[i] >= 0;
        if (next_layout.row[i] >= 0 && !was_shown) {
            added[snapshot.nodes[i].parent].push_back(static_cast<std::int32_t>(i));
        }
    }

    snapshot_ = std::move(snapshot);
    layout_.children.resize(snapshot_.nodes.size());
    layout_.row.resize(snapshot_.nodes.size(), -1);
    for (const std::int32_t node : changed) {
        emit dataChanged(index_of_node(node, 0), index_of_node(node, column_count - 1));
    }
    for (const auto& [parent, nodes] : added) {
        std::vector<std::int32_t>& list =
            parent < 0 ? layout_.roots : layout_.children[static_cast<std::size_t>(parent)];
        const int first = static_cast<int>(list.size());
        beginInsertRows(index_of_node(parent), first, first + static_cast<int>(nodes.size()) - 1);
        for (const std::int32_t node : nodes) {
            layout_.row[static_cast<std::size_t>(node)] = static_cast<int>(list.size());
            list.push_back(node);
            ++layout_.shown;
        }
        endInsertRows();
    }
}

bool PrefixTreeModel::evicted(const profiler::PrefixNode& node) const {
    return node.evicted_ns >= 0 && node.evicted_ns <= snapshot_.time_ns;
}

QModelIndex PrefixTreeModel::index_of_node(int node, int column) const {
    if (node < 0 || static_cast<std::size_t>(node) >= layout_.row.size() ||
        layout_.row[static_cast<std::size_t>(node)] < 0 || column < 0 || column >= column_count) {
        return {};
    }
    return createIndex(layout_.row[static_cast<std::size_t>(node)], column,
                       static_cast<quintptr>(node));
}

QModelIndex PrefixTreeModel::index(int row, int column, const QModelIndex& parent) const {
    if (row < 0 || column < 0 || column >= column_count ||
        (parent.isValid() && parent.column() != 0)) {
        return {};
    }
    const std::vector<std::int32_t>& list =
        parent.isValid() ? layout_.children[static_cast<std::size_t>(parent.internalId())]
                         : layout_.roots;
    if (static_cast<std::size_t>(row) >= list.size()) {
        return {};
    }
    return createIndex(row, column, static_cast<quintptr>(list[static_cast<std::size_t>(row)]));
}

QModelIndex PrefixTreeModel::parent(const QModelIndex& child) const {
    if (!child.isValid()) {
        return {};
    }
    return index_of_node(snapshot_.nodes[static_cast<std::size_t>(child.internalId())].parent);
}

int PrefixTreeModel::rowCount(const QModelIndex& parent) const {
    if (!parent.isValid()) {
        return static_cast<int>(layout_.roots.size());
    }
    if (parent.column() != 0) {
        return 0;
    }
    return static_cast<int>(layout_.children[static_cast<std::size_t>(parent.internalId())].size());
}

int PrefixTreeModel::columnCount(const QModelIndex&) const {
    return columns_.count();
}

QString PrefixTreeModel::prefix_text(int node) const {
    std::vector<int> path;
    for (int at = node; at >= 0; at = snapshot_.nodes[static_cast<std::size_t>(at)].parent) {
        path.push_back(at);
    }
    QString text;
    for (auto at = path.rbegin(); at != path.rend(); ++at) {
        text += snapshot_.texts[static_cast<std::size_t>(*at)];
    }
    return text;
}

QVariant PrefixTreeModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid()) {
        return {};
    }
    const auto node_index = static_cast<int>(index.internalId());
    const profiler::PrefixNode& node = snapshot_.nodes[static_cast<std::size_t>(node_index)];
    const bool gone = evicted(node);
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case text_column:
            return shown_text(snapshot_.texts[static_cast<std::size_t>(node_index)]);
        case block_column:
            return node.block;
        case reuses_column:
            return static_cast<qlonglong>(node.reuses);
        case cached_at_column:
            return QString::number(seconds(snapshot_.start_ns, node.cached_ns), 'f', 3);
        case status_column:
            return gone ? QString("evicted at %1 s")
                              .arg(seconds(snapshot_.start_ns, node.evicted_ns), 0, 'f', 3)
                        : QString("cached");
        default:
            return {};
        }
    case Qt::ToolTipRole:
        if (index.column() == text_column) {
            // The whole prefix this row ends, which the path to it spells.
            QString text = shown_text(prefix_text(node_index));
            if (text.size() > kTooltipChars) {
                text = QChar(0x2026) + text.right(kTooltipChars - 1);
            }
            return QString("Prefix of request %1, tokens 0\u2013%2:\n%3")
                .arg(node.cached_by)
                .arg(node.first_token + snapshot_.block_size)
                .arg(text);
        }
        return QString("Hash 0x%1").arg(static_cast<qulonglong>(node.hash), 16, 16, QChar('0'));
    case Qt::TextAlignmentRole:
        return columns_.alignment(index.column());
    case Qt::ForegroundRole:
        return gone ? QVariant(QColor(Qt::gray)) : QVariant();
    case request_role:
        return static_cast<qlonglong>(node.cached_by);
    case node_role:
        return node_index;
    default:
        return {};
    }
}

QVariant PrefixTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
    return columns_.header_data(section, orientation, role);
}

} // namespace kvscope::ui
