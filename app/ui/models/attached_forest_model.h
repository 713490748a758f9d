// Attached engines' prefix forest for a QTreeView: a row per source, rank and
// cache tier; under it the prefix trees its parent hashes draw (largest
// first), each block's children the blocks that continue its prefix. Built
// from a value snapshot of an AttachedState; a tier shows at most
// kMaxBlocksPerTier blocks, the rest summed up in one row.
#pragma once

#include "app/ui/models/table_model.h"
#include "profiler/attach/attached_events.h"

#include <QAbstractItemModel>
#include <QString>

namespace kvscope::tokenizer {
class Tokenizer;
}

namespace kvscope::ui {

struct ForestNode {
    QString label;        // the tier's name, or a block's hash
    QString tokens;       // a block's token ids, or their text through a tokenizer
    qint64 blocks = 0;    // the blocks at and below this row
    qint64 depth = 0;     // the longest chain below this row, itself included
    double stored_at = 0; // the publisher's clock, seconds since the epoch; 0: none
    int parent = -1;
    int row = 0; // among its parent's children
    std::vector<int> children;
    QString key; // stable across snapshots: tier and hash, for keeping expansion
};

class AttachedForestModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { prefix_column, tokens_column, blocks_column, depth_column, stored_column };
    static constexpr int column_count = 5;
    static constexpr int kMaxBlocksPerTier = 20'000;
    // ForestNode::key of a row (QString).
    static constexpr int key_role = Qt::UserRole + 1;

    explicit AttachedForestModel(QObject* parent = nullptr);

    // Every row of a state's forest: what a worker thread builds (it touches
    // no model) and set_forest() shows.
    struct Forest {
        std::vector<ForestNode> nodes;
        std::vector<int> top; // tier rows
    };
    // `tokenizer` (may be null) turns token ids into text.
    static Forest build(const attach::AttachedState& state, const tokenizer::Tokenizer* tokenizer);
    void set_forest(Forest forest);
    void set_state(const attach::AttachedState& state, const tokenizer::Tokenizer* tokenizer) {
        set_forest(build(state, tokenizer));
    }
    const std::vector<ForestNode>& nodes() const { return nodes_; }
    QModelIndex index_of(int node) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    const std::vector<int>& children_of(const QModelIndex& parent) const;

    TableColumns columns_;
    std::vector<ForestNode> nodes_;
    std::vector<int> top_; // tier rows
};

} // namespace kvscope::ui
