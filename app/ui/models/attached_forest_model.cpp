#include "app/ui/models/attached_forest_model.h"

#include "app/ui/workers/free_on_worker.h"
#include "profiler/attach/token_text.h"

#include <cmath>

#include <QDateTime>

namespace kvscope::ui {

AttachedForestModel::AttachedForestModel(QObject* parent)
    : QAbstractItemModel(parent)
    , columns_({{tr("Prefix"), false},
                {tr("Tokens"), false},
                {tr("Blocks"), true},
                {tr("Depth"), true},
                {tr("Stored at"), false}}) {}

AttachedForestModel::Forest AttachedForestModel::build(const attach::AttachedState& state,
                                                       const tokenizer::Tokenizer* tokenizer) {
    Forest forest;
    std::vector<ForestNode>& nodes = forest.nodes;
    std::vector<int>& top = forest.top;
    for (const auto& [id, source] : state.sources()) {
        for (const auto& [key, tier] : source.blocks.tiers()) {
            const int tier_node = static_cast<int>(nodes.size());
            const QString tier_key =
                QString("%1/%2/%3").arg(id).arg(key.rank).arg(QString::fromStdString(key.medium));
            ForestNode t;
            t.label = tr("source %1 · rank %2 · %3")
                          .arg(id)
                          .arg(key.rank)
                          .arg(QString::fromStdString(key.medium));
            t.key = tier_key;
            t.blocks = static_cast<qint64>(tier.blocks.size());
            t.row = static_cast<int>(top.size());
            nodes.push_back(t);
            top.push_back(tier_node);
            // Depth-first, parents before children: in_tree_order() gives
            // each tree's blocks from its root down.
            std::unordered_map<attach::BlockHash, int> node_of;
            qint64 shown = 0;
            for (const auto& [hash, tree] : source.blocks.in_tree_order(key)) {
                if (shown++ >= kMaxBlocksPerTier) {
                    break;
                }
                const attach::ResidentBlock* block = source.blocks.find(key, hash);
                ForestNode n;
                n.label = QString::fromStdString(hash.hex());
                n.key = tier_key + "/" + n.label;
                n.tokens = QString::fromStdString(
                    tokenizer != nullptr ? attach::tokens_text(*tokenizer, block->token_ids, 60)
                                         : attach::token_ids_text(block->token_ids, 8));
                n.stored_at = block->stored_at;
                n.blocks = 1;
                n.depth = 1;
                const auto parent = block->parent ? node_of.find(*block->parent) : node_of.end();
                n.parent = parent != node_of.end() ? parent->second : tier_node;
                const int index = static_cast<int>(nodes.size());
                node_of.emplace(hash, index);
                std::vector<int>& siblings = nodes[static_cast<std::size_t>(n.parent)].children;
                n.row = static_cast<int>(siblings.size());
                siblings.push_back(index);
                nodes.push_back(std::move(n));
            }
            const qint64 left = static_cast<qint64>(tier.blocks.size()) - kMaxBlocksPerTier;
            if (left > 0) {
                ForestNode more;
                more.label = tr("… %1 more blocks not listed").arg(left);
                more.key = tier_key + "/more";
                more.parent = tier_node;
                more.row =
                    static_cast<int>(nodes[static_cast<std::size_t>(tier_node)].children.size());
                nodes[static_cast<std::size_t>(tier_node)].children.push_back(
                    static_cast<int>(nodes.size()));
                nodes.push_back(more);
            }
        }
    }
    // Sizes and depths bottom-up: children always come after their parent.
    for (int i = static_cast<int>(nodes.size()) - 1; i >= 0; --i) {
        ForestNode& n = nodes[static_cast<std::size_t>(i)];
        if (n.parent < 0 || n.blocks == 0 || nodes[static_cast<std::size_t>(n.parent)].parent < 0) {
            continue; // tier rows keep their resident count; "more" rows stay empty
        }
        ForestNode& p = nodes[static_cast<std::size_t>(n.parent)];
        p.blocks += n.blocks;
        p.depth = std::max(p.depth, n.depth + 1);
    }
    for (const int tier : top) {
        qint64 depth = 0;
        for (const int child : nodes[static_cast<std::size_t>(tier)].children) {
            depth = std::max(depth, nodes[static_cast<std::size_t>(child)].depth);
        }
        nodes[static_cast<std::size_t>(tier)].depth = depth;
    }
    return forest;
}

void AttachedForestModel::set_forest(Forest forest) {
    beginResetModel();
    std::swap(nodes_, forest.nodes);
    std::swap(top_, forest.top);
    endResetModel();
    free_on_worker(std::move(forest)); // the old rows: 160,000 of them take a while
}

const std::vector<int>& AttachedForestModel::children_of(const QModelIndex& parent) const {
    if (!parent.isValid()) {
        return top_;
    }
    return nodes_[static_cast<std::size_t>(parent.internalId())].children;
}

QModelIndex AttachedForestModel::index_of(int node) const {
    if (node < 0 || node >= static_cast<int>(nodes_.size())) {
        return {};
    }
    return createIndex(nodes_[static_cast<std::size_t>(node)].row, 0, static_cast<quintptr>(node));
}

QModelIndex AttachedForestModel::index(int row, int column, const QModelIndex& parent) const {
    const std::vector<int>& children = children_of(parent);
    if (row < 0 || row >= static_cast<int>(children.size()) || column < 0 ||
        column >= column_count) {
        return {};
    }
    return createIndex(row, column, static_cast<quintptr>(children[static_cast<std::size_t>(row)]));
}

QModelIndex AttachedForestModel::parent(const QModelIndex& child) const {
    if (!child.isValid()) {
        return {};
    }
    return index_of(nodes_[static_cast<std::size_t>(child.internalId())].parent);
}

int AttachedForestModel::rowCount(const QModelIndex& parent) const {
    if (parent.isValid() && parent.column() != 0) {
        return 0;
    }
    return static_cast<int>(children_of(parent).size());
}

int AttachedForestModel::columnCount(const QModelIndex&) const {
    return column_count;
}

QVariant AttachedForestModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid()) {
        return {};
    }
    const ForestNode& n = nodes_[static_cast<std::size_t>(index.internalId())];
    if (role == key_role) {
        return n.key;
    }
    if (role == Qt::TextAlignmentRole) {
        return columns_.alignment(index.column());
    }
    if (role != Qt::DisplayRole) {
        return {};
    }
    switch (index.column()) {
    case prefix_column:
        return n.label;
    case tokens_column:
        return n.tokens;
    case blocks_column:
        return n.blocks > 0 ? QVariant(n.blocks) : QVariant();
    case depth_column:
        return n.depth > 0 ? QVariant(n.depth) : QVariant();
    case stored_column:
        return n.stored_at > 0 ? QVariant(QDateTime::fromMSecsSinceEpoch(
                                              static_cast<qint64>(std::llround(n.stored_at * 1e3)))
                                              .toString("hh:mm:ss.zzz"))
                               : QVariant();
    default:
        return {};
    }
}

QVariant AttachedForestModel::headerData(int section, Qt::Orientation orientation, int role) const {
    return columns_.header_data(section, orientation, role);
}

} // namespace kvscope::ui
