// The "Attached prefixes" tab: attached engines' prefix forest (from the
// parent hashes in their KV events) at the moment shown, with the token ids
// or, when a tokenizer was given, their text. Rebuilt at most once a second
// while live; rows opened stay open.
#pragma once

#include "app/ui/models/attached_forest_model.h"
#include "app/ui/workers/background_build.h"
#include "app/ui/views/rebuild_throttle.h"

#include <limits>
#include <memory>

#include <QWidget>

class QLabel;
class QTreeView;

namespace kvscope::profiler {
class RunStore;
}
namespace kvscope::tokenizer {
class Tokenizer;
}

namespace kvscope::ui {

class AttachedPrefixPanel : public QWidget {
    Q_OBJECT
public:
    explicit AttachedPrefixPanel(QWidget* parent = nullptr);
    ~AttachedPrefixPanel() override;

    void set_store(const profiler::RunStore* store);
    void set_tokenizer(std::shared_ptr<const tokenizer::Tokenizer> tokenizer);
    // Rebuilds now (on a worker thread past kInlineBlocks resident blocks,
    // shown when ready).
    void set_time_ns(qint64 t_ns);
    void refresh(); // live: at most once a second, less often when rebuilds cost more
    static constexpr std::size_t kInlineBlocks = 5'000;
    bool rebuilding() const { return builds_.busy(); }

    qint64 time_ns() const { return time_ns_; }
    AttachedForestModel* model() const { return model_; }
    QTreeView* tree() const { return tree_; }

private:
    void rebuild();
    void show_forest(AttachedForestModel::Forest forest);

    const profiler::RunStore* store_ = nullptr;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    qint64 time_ns_ = std::numeric_limits<qint64>::max();
    AttachedForestModel* model_ = nullptr;
    QTreeView* tree_ = nullptr;
    QLabel* note_ = nullptr;
    RebuildThrottle live_rebuilds_{std::chrono::milliseconds(1000)};
    BackgroundBuild<AttachedForestModel::Forest> builds_;
};

} // namespace kvscope::ui
