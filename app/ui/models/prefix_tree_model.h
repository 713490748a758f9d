// The prefix cache as a tree, for a QTreeView: a row per cached block, its
// children the blocks that extend its prefix by one block, so the path from a
// root spells a whole cached prefix. Fed by value snapshots (built from the
// store on the UI thread); a newer snapshot that only adds rows inserts them,
// so the view keeps its expansion and selection while a run goes on.
#pragma once

#include "app/ui/models/table_model.h"
#include "profiler/store/run_store.h"

#include <cstdint>
#include <vector>

#include <QAbstractItemModel>
#include <QString>

namespace kvscope::ui {

struct PrefixTreeSnapshot {
    // RunStore::prefix_nodes(), with `reuses` as of `time_ns` for nodes
    // still cached then.
    std::vector<profiler::PrefixNode> nodes;
    std::vector<QString> texts; // per node: the text of its block's tokens
    std::int64_t start_ns = 0;  // the run's start: "Cached at" counts from it
    std::int64_t time_ns = 0;   // the moment shown: later nodes are left out
    int block_size = 16;        // tokens per block
};

// `store`'s prefix tree at `time_ns`. Texts are taken from `previous` where
// it has them (a node's text never changes), so live updates stay cheap.
PrefixTreeSnapshot prefix_tree_snapshot(const profiler::RunStore& store, std::int64_t time_ns,
                                        const PrefixTreeSnapshot* previous = nullptr);

class PrefixTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { text_column, block_column, reuses_column, cached_at_column, status_column };
    static constexpr int column_count = 5;
    // The request whose tokens a row's block holds (qint64).
    static constexpr int request_role = Qt::UserRole + 1;
    // The row's index into the snapshot's nodes (int).
    static constexpr int node_role = Qt::UserRole + 2;

    explicit PrefixTreeModel(QObject* parent = nullptr);

    void set_snapshot(PrefixTreeSnapshot snapshot);
    const PrefixTreeSnapshot& snapshot() const { return snapshot_; }
    // Nodes shown at the snapshot's time.
    int shown_count() const { return layout_.shown; }
    // The row of snapshot node `node` (invalid when it is not shown).
    QModelIndex index_of_node(int node, int column = 0) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    // Which nodes are shown and where: children in node order.
    struct Layout {
        std::vector<std::int32_t> roots;
        std::vector<std::vector<std::int32_t>> children; // per node
        std::vector<int> row;                            // per node; -1: not shown
        int shown = 0;
    };
    static Layout layout_of(const PrefixTreeSnapshot& snapshot);
    bool only_adds(const PrefixTreeSnapshot& next, const Layout& next_layout) const;
    bool evicted(const profiler::PrefixNode& node) const;
    QString prefix_text(int node) const;

    TableColumns columns_;
    PrefixTreeSnapshot snapshot_;
    Layout layout_;
};

} // namespace kvscope::ui
