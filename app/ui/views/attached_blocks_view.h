// The block map of attached engines (kvscope attach): one section per
// source, rank and cache tier, a square per resident block, coloured by the
// prefix tree it belongs to and laid out tree by tree, so shared prefixes
// read as runs of one colour; grey squares are the rest of the capacity when
// it is known. KV events name blocks by hash only: positions are kvscope's
// layout, not the engine's block ids, and the view says so.
#pragma once

#include "app/ui/views/rebuild_throttle.h"
#include "app/ui/workers/background_build.h"
#include "profiler/attach/attached_events.h"

#include <limits>
#include <memory>

#include <QImage>
#include <QWidget>

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

class AttachedBlocksView : public QWidget {
    Q_OBJECT
public:
    explicit AttachedBlocksView(QWidget* parent = nullptr);

    void set_store(const profiler::RunStore* store);
    // Shows the blocks resident right after every row at or before `t_ns`.
    void set_time_ns(qint64 t_ns);
    // The store grew (live): rebuilt when the throttle allows (every frame
    // while cheap, less often as the blocks grow). Past kInlineBlocks blocks
    // the sections are built on a worker thread and swapped in when ready.
    void refresh();
    bool showing_past() const { return showing_past_; }
    static constexpr std::size_t kInlineBlocks = 5'000;
    // A rebuild is under way on a worker.
    bool rebuilding() const { return builds_.busy(); }

    struct Cell {
        attach::BlockHash hash{};
        std::int32_t tree = -1; // index in its tier's trees(); -1: free capacity
    };
    struct Section {
        std::int64_t source = 0;
        attach::TierKey tier{};
        QString title; // "source 0 · rank 0 · GPU: 340 of 1000 blocks"
        std::vector<Cell> cells;
        QRect title_rect;
        QRect grid_rect;
        int columns = 1;
    };
    // Every source's tiers as sections of cells (no geometry yet): what the
    // worker builds.
    static std::vector<Section> build_sections(const attach::AttachedState& state);
    const std::vector<Section>& sections() const { return sections_; }
    int cell_size() const { return cell_; }
    // The section and cell under `pos`; {-1, -1} for none.
    std::pair<int, int> cell_at(QPoint pos) const;
    QString tooltip_for(int section, int cell) const;
    static QString caveat();

    QSize sizeHint() const override { return {600, 400}; }
    QSize minimumSizeHint() const override { return {200, 120}; }

protected:
    bool event(QEvent* event) override;
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    struct Built {
        std::shared_ptr<const attach::AttachedState> state;
        std::vector<Section> sections;
    };
    void rebuild();
    void lay_out();
    const attach::AttachedState& state() const;
    // Each section's squares drawn once per layout, not on every paint.
    void draw_grids();

    const profiler::RunStore* store_ = nullptr;
    qint64 time_ns_ = std::numeric_limits<qint64>::max();
    bool showing_past_ = false;
    RebuildThrottle live_rebuilds_{std::chrono::milliseconds(0)};
    BackgroundBuild<Built> builds_;
    std::shared_ptr<const attach::AttachedState> state_; // what sections_ were built from
    std::vector<Section> sections_;
    std::vector<QImage> grids_; // per section; empty: to draw
    int cell_ = 8;
    QRect caveat_rect_;
};

} // namespace kvscope::ui
