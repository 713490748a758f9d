#include "app/ui/panels/attached_prefix_panel.h"

#include "app/ui/models/attached_forest_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "profiler/store/run_store.h"

#include <QHeaderView>
#include <QLabel>
#include <QSet>
#include <QTreeView>
#include <QVBoxLayout>

namespace kvscope::ui {

AttachedPrefixPanel::AttachedPrefixPanel(QWidget* parent)
    : QWidget(parent)
    , model_(new AttachedForestModel(this))
    , builds_(this, [this](AttachedForestModel::Forest forest, qint64 cost_ms) {
        live_rebuilds_.ran(cost_ms);
        show_forest(std::move(forest));
    }) {
    setObjectName("attachedPrefixPanel");
    tree_ = new QTreeView;
    tree_->setModel(model_);
    tree_->setUniformRowHeights(true); // fast with thousands of rows
    tree_->header()->setSectionResizeMode(AttachedForestModel::tokens_column, QHeaderView::Stretch);
    note_ = new QLabel(
        tr("Prefix trees as attached engines' KV events draw them: each block under the block "
           "its parent hash names. Events carry no requests, so which requests shared a prefix, "
           "and how often it was hit, are not shown; blocks whose parent is no longer resident "
           "start trees of their own."));
    note_->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(note_);
    layout->addWidget(tree_, 1);
}

AttachedPrefixPanel::~AttachedPrefixPanel() = default;

void AttachedPrefixPanel::set_store(const profiler::RunStore* store) {
    store_ = store;
    time_ns_ = std::numeric_limits<qint64>::max();
    rebuild();
}

void AttachedPrefixPanel::set_tokenizer(std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
    tokenizer_ = std::move(tokenizer);
    rebuild();
}

void AttachedPrefixPanel::set_time_ns(qint64 t_ns) {
    time_ns_ = t_ns;
    rebuild();
}

void AttachedPrefixPanel::refresh() {
    if (!builds_.busy() && live_rebuilds_.due()) {
        rebuild();
    }
}

void AttachedPrefixPanel::rebuild() {
    std::shared_ptr<const attach::AttachedState> state =
        store_ != nullptr ? store_->attached().state_at(time_ns_)
                          : std::make_shared<const attach::AttachedState>();
    const std::size_t blocks = state->resident_blocks();
    builds_.request(
        [state, tokenizer = tokenizer_] {
            return AttachedForestModel::build(*state, tokenizer.get());
        },
        blocks <= kInlineBlocks);
}

void AttachedPrefixPanel::show_forest(AttachedForestModel::Forest forest) {
    // Rows opened stay open across the rebuild, found again by their keys.
    // Only open rows are walked into: a tier of thousands of closed trees
    // costs one look per tree.
    QSet<QString> expanded;
    std::vector<QModelIndex> open{QModelIndex()};
    while (!open.empty()) {
        const QModelIndex parent = open.back();
        open.pop_back();
        for (int row = 0; row < model_->rowCount(parent); ++row) {
            const QModelIndex child = model_->index(row, 0, parent);
            if (tree_->isExpanded(child)) {
                expanded.insert(child.data(AttachedForestModel::key_role).toString());
                open.push_back(child);
            }
        }
    }
    const bool first = model_->nodes().empty();
    model_->set_forest(std::move(forest));
    // Down from the tiers, into the rows that were open only.
    open.push_back(QModelIndex());
    while (!open.empty()) {
        const QModelIndex parent = open.back();
        open.pop_back();
        for (int row = 0; row < model_->rowCount(parent); ++row) {
            const QModelIndex child = model_->index(row, 0, parent);
            // Tiers open the first time, so the trees show at once.
            if (expanded.contains(child.data(AttachedForestModel::key_role).toString()) ||
                (first && !parent.isValid())) {
                tree_->setExpanded(child, true);
                open.push_back(child);
            }
        }
    }
}

} // namespace kvscope::ui
