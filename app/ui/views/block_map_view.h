// Every physical KV-cache block at the moment shown, as a grid of squares:
// used blocks in their request's colour, shared ones outlined with their
// reference count, cached prefix blocks hatched in a tint of the request that
// filled them, free ones grey. Marks on top: a red band for rolled-back draft
// slots, a corner for a block loaded from (or also held in) the offload tier,
// whose fill the legend gives. A tooltip says what a block holds, down to the
// text of its tokens; a click selects the request that owns it. A hybrid
// cache's blocks are drawn in one band per KV group (the blocks each group
// holds, used or cached, by id), then a band of the free ones: the global
// group's band grows with the context while the window groups' stay flat.
#pragma once

#include "profiler/store/block_map_state.h"

#include <limits>
#include <optional>

#include <QStringList>
#include <QWidget>

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

class BlockMapView : public QWidget {
    Q_OBJECT
public:
    explicit BlockMapView(QWidget* parent = nullptr);

    // The store is not owned; null shows nothing.
    void set_store(const profiler::RunStore* store);
    // Shows the blocks as they were right after every event at or before `t_ns`
    // (until called: the latest).
    void set_time_ns(qint64 t_ns);
    // The store grew (live): repaint from its current contents.
    void refresh();

    qint64 time_ns() const { return time_ns_; }
    int block_count() const;
    // The block painted under `pos`, -1 for none.
    int block_at(QPoint pos) const;
    // Where `block` is painted (empty when it is not).
    QRect block_rect(int block) const;
    // Rich text: state, hash, references, owners, token range and text, reuses.
    QString tooltip_for_block(int block) const;
    // The legend's texts: each use with its block count, then the KV format.
    QStringList legend_entries() const;
    // The bands' labels: a hybrid cache's groups ("Group 1, window 512: 33
    // used, 0 cached"), then "Free: N"; empty for a plain cache's one band.
    QStringList band_labels() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    static QColor free_color();

signals:
    // The request that owns a clicked block (for a cached block: the one whose
    // tokens it holds).
    void request_selected(qint64 request);

protected:
    bool event(QEvent* event) override;
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;

private:
    struct Grid {
        QRect area;   // where the squares go
        int cell = 0; // square size plus gap, in pixels
        int gap = 0;
        int columns = 0;
    };
    // The blocks in drawing order, in bands, and where each one goes.
    struct Band {
        QString label; // empty: none (a plain cache's one band)
        std::vector<int> blocks;
    };
    struct Layout {
        Grid grid;
        std::vector<Band> bands;
        std::vector<QRect> squares; // by block id; empty where it does not fit
        std::vector<QRect> labels;  // by band
    };
    struct LegendItem {
        int kind = 0; // which swatch to draw
        QString text;
    };

    const profiler::BlockMapState* state() const;
    void update_state();
    Layout layout() const;
    std::vector<Band> bands() const;
    std::vector<LegendItem> legend_items() const;
    int legend_height(int width) const;
    // A block's use (paint_use), then its marks: rolled-back draft slots,
    // its place in the offload tier.
    void paint_block(QPainter& painter, const QRect& square,
                     const profiler::BlockState& block) const;
    void paint_use(QPainter& painter, const QRect& square, const profiler::BlockState& block) const;
    void paint_tiny_blocks(QPainter& painter, const Layout& l,
                           const profiler::BlockMapState& s) const;
    void paint_legend(QPainter& painter, const QRect& area) const;
    void paint_swatch(QPainter& painter, const QRect& swatch, int kind) const;

    const profiler::RunStore* store_ = nullptr;
    qint64 time_ns_ = std::numeric_limits<qint64>::max(); // the latest until set
    // The state at a moment before the store's end (the end's is the store's own).
    std::optional<profiler::BlockMapState> past_;
    qint64 past_time_ns_ = 0;
    qint64 past_events_ = 0;
};

} // namespace kvscope::ui
