#include "app/ui/views/block_map_view.h"

#include "app/ui/export/plot_export.h"
#include "app/ui/views/request_colors.h"
#include "profiler/store/run_store.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <QFontMetrics>
#include <QHelpEvent>
#include <QImage>
#include <QLocale>
#include <QMouseEvent>
#include <QPaintEvent>
#include <QPainter>
#include <QPolygon>
#include <QStringList>
#include <QToolTip>

namespace kvscope::ui {
namespace {

using profiler::BlockState;
using profiler::BlockUse;

// Squares larger than this only waste room on a small cache.
constexpr int kMaxCell = 40;
// The reference count is drawn only where it can be read.
constexpr int kMinSquareForText = 14;
// Squares up to this size are painted as an image (see paint_tiny_blocks).
constexpr int kMaxTinySquare = 3;
constexpr int kMargin = 4;
constexpr int kTextChars = 120;

const QColor kSharedBorder(25, 25, 25);
// Rolled-back draft slots (speculative decoding).
const QColor kRolledBack(220, 30, 30);
// The offload tier: a block loaded back from it, or whose content it also holds.
const QColor kTierLoaded(0, 150, 136);
const QColor kTierSaved(142, 68, 173);

enum SwatchKind {
    used_swatch,
    shared_swatch,
    cached_swatch,
    free_swatch,
    rolled_back_swatch,
    tier_loaded_swatch,
    tier_saved_swatch,
    no_swatch
};

const BlockState& free_block() {
    static const BlockState state;
    return state;
}

// How many tokens of prompt and output `r` had at `t_ns`, so a block that is
// still filling shows only what it held then. Unknown (no limit) without a
// prompt length or, once decoding, without per-token events.
std::int64_t tokens_at(const profiler::RequestRecord& r, qint64 t_ns) {
    if (r.prompt_tokens <= 0) {
        return std::numeric_limits<std::int64_t>::max();
    }
    if (r.first_token_ns < 0 || t_ns < r.first_token_ns) {
        return r.prompt_tokens;
    }
    if (r.output_times_ns.empty()) {
        return std::numeric_limits<std::int64_t>::max();
    }
    const auto generated = std::upper_bound(r.output_times_ns.begin(), r.output_times_ns.end(),
                                            static_cast<std::int64_t>(t_ns)) -
                           r.output_times_ns.begin();
    return r.prompt_tokens + generated;
}

QString displayable_text(const std::string& raw) {
    QString text = QString::fromStdString(raw);
    // Newlines would break the tooltip's layout; show them as a symbol.
    text.replace('\n', QChar(0x23CE));
    if (text.size() > kTextChars) {
        text = text.left(kTextChars - 1) + QChar(0x2026);
    }
    return text.toHtmlEscaped();
}

QString state_text(const BlockState& b) {
    switch (b.use()) {
    case BlockUse::used:
        return b.ref_count() > 1 ? QString("shared by %1 requests").arg(b.ref_count())
                                 : QString("used");
    case BlockUse::cached:
        return "cached (free, its prefix reusable)";
    case BlockUse::free:
        break;
    }
    return "free";
}

// Items flow left to right and wrap, so a narrow view keeps every entry.
std::vector<QRect> legend_layout(const QFontMetrics& metrics, const std::vector<QString>& texts,
                                 int width) {
    const int line = metrics.height() + 4;
    const int swatch = metrics.height();
    std::vector<QRect> rects;
    int x = 0;
    int y = 0;
    for (const QString& text : texts) {
        const int w = swatch + 4 + metrics.horizontalAdvance(text);
        if (x > 0 && x + w > width) {
            x = 0;
            y += line;
        }
        rects.emplace_back(x, y, w, line);
        x += w + 14;
    }
    return rects;
}

} // namespace

BlockMapView::BlockMapView(QWidget* parent)
    : QWidget(parent) {
    setObjectName("block_map");
    setAttribute(Qt::WA_OpaquePaintEvent);
    add_export_menu(this);
}

QColor BlockMapView::free_color() {
    return QColor(222, 222, 222);
}

void BlockMapView::set_store(const profiler::RunStore* store) {
    store_ = store;
    past_.reset();
    update_state();
    update();
}

void BlockMapView::set_time_ns(qint64 t_ns) {
    if (t_ns == time_ns_) {
        return;
    }
    time_ns_ = t_ns;
    update_state();
    update();
}

void BlockMapView::refresh() {
    update_state();
    update();
}

void BlockMapView::update_state() {
    if (store_ == nullptr || time_ns_ >= store_->end_ns()) {
        past_.reset(); // the store keeps the latest state itself
        return;
    }
    if (past_ && past_time_ns_ == time_ns_ && past_events_ == store_->event_count()) {
        return;
    }
    past_ = store_->block_map_at(time_ns_);
    past_time_ns_ = time_ns_;
    past_events_ = store_->event_count();
}

const profiler::BlockMapState* BlockMapView::state() const {
    if (store_ == nullptr) {
        return nullptr;
    }
    return past_ ? &*past_ : &store_->block_map_now();
}

int BlockMapView::block_count() const {
    const profiler::BlockMapState* s = state();
    if (s == nullptr) {
        return 0;
    }
    // Events may name blocks past the configured count; the map grows for them.
    return std::max(store_->total_blocks(), static_cast<int>(s->blocks().size()));
}

std::vector<BlockMapView::LegendItem> BlockMapView::legend_items() const {
    const profiler::BlockMapState* s = state();
    profiler::BlockCounts counts;
    if (s != nullptr) {
        counts = s->counts();
        counts.free += block_count() - static_cast<int>(s->blocks().size());
    }
    std::vector<LegendItem> items = {
        {used_swatch, QString("Used (colour = request): %1").arg(counts.used)},
        {shared_swatch, QString("Shared \u00d7N: %1").arg(counts.shared)},
        {cached_swatch, QString("Cached (prefix, reusable): %1").arg(counts.cached)},
        {free_swatch, QString("Free: %1").arg(counts.free)},
    };
    if (store_ != nullptr && (!store_->kv_formats().empty() || store_->bytes_per_block() > 0)) {
        QStringList kv;
        if (!store_->kv_formats().empty()) {
            kv << QString("KV %1").arg(QString::fromStdString(store_->kv_formats()));
        }
        if (store_->bytes_per_block() > 0) {
            kv << QString("%1 per block")
                      .arg(QLocale::c().formattedDataSize(store_->bytes_per_block(), 1,
                                                          QLocale::DataSizeIecFormat));
        }
        items.push_back({no_swatch, kv.join(", ")});
    }
    if (store_ != nullptr && store_->draft_verifies() > 0) {
        items.push_back({rolled_back_swatch, QString("Rolled-back draft slots")});
    }
    if (store_ != nullptr && store_->tier_capacity() > 0) {
        items.push_back({tier_loaded_swatch, QString("Loaded from the offload tier")});
        items.push_back({tier_saved_swatch, QString("Also in the offload tier")});
        items.push_back({no_swatch, QString("Offload tier (%1): %2 of %3 blocks")
                                        .arg(QString::fromStdString(store_->tier_medium()))
                                        .arg(s != nullptr ? s->tier_blocks() : 0)
                                        .arg(store_->tier_capacity())});
    }
    return items;
}

int BlockMapView::legend_height(int width) const {
    std::vector<QString> texts;
    for (const LegendItem& item : legend_items()) {
        texts.push_back(item.text);
    }
    const std::vector<QRect> rects = legend_layout(fontMetrics(), texts, width);
    return rects.empty() ? 0 : rects.back().bottom() + 1;
}

std::vector<BlockMapView::Band> BlockMapView::bands() const {
    const profiler::BlockMapState* s = state();
    const int n = block_count();
    if (s == nullptr || store_->kv_group_count() < 2) {
        Band all;
        all.blocks.resize(static_cast<std::size_t>(n));
        std::iota(all.blocks.begin(), all.blocks.end(), 0);
        return {all};
    }
    // A band per group with samples, in group order; the free blocks last
    // (with any block of a group the run never reported, a damaged file's).
    const std::vector<profiler::RunStore::KvGroupTrack>& groups = store_->kv_groups();
    std::vector<int> band_of(groups.size(), -1);
    std::vector<Band> bands;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        if (!groups[g].used.values.empty()) {
            band_of[g] = static_cast<int>(bands.size());
            bands.emplace_back();
        }
    }
    bands.emplace_back();
    std::vector<int> used(bands.size(), 0);
    std::vector<int> cached(bands.size(), 0);
    int free_blocks = 0;
    const std::vector<BlockState>& blocks = s->blocks();
    for (int block = 0; block < n; ++block) {
        const auto index = static_cast<std::size_t>(block);
        const BlockState& b = index < blocks.size() ? blocks[index] : free_block();
        const BlockUse use = b.use();
        const auto group = static_cast<std::size_t>(b.group);
        const int band = use == BlockUse::free || group >= band_of.size() ? -1 : band_of[group];
        if (band < 0) {
            free_blocks += use == BlockUse::free ? 1 : 0;
            bands.back().blocks.push_back(block);
            continue;
        }
        bands[static_cast<std::size_t>(band)].blocks.push_back(block);
        ++(use == BlockUse::used ? used : cached)[static_cast<std::size_t>(band)];
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
        if (band_of[g] < 0) {
            continue;
        }
        const auto band = static_cast<std::size_t>(band_of[g]);
        const std::int32_t window = groups[g].window;
        bands[band].label =
            QString("Group %1, %2: %3 used, %4 cached")
                .arg(g)
                .arg(window > 0 ? QString("window %1").arg(window) : QString("global"))
                .arg(used[band])
                .arg(cached[band]);
    }
    bands.back().label = QString("Free: %1").arg(free_blocks);
    return bands;
}

BlockMapView::Layout BlockMapView::layout() const {
    Layout l;
    l.bands = bands();
    const int n = block_count();
    const QRect all = rect().adjusted(kMargin, kMargin, -kMargin, -kMargin);
    const int legend = legend_height(all.width());
    Grid& g = l.grid;
    g.area = all.adjusted(0, 0, 0, -(legend + kMargin));
    if (n == 0 || g.area.width() < 1 || g.area.height() < 1) {
        return l;
    }
    // Labels only where they leave room for one-pixel squares of every block.
    int label_height = fontMetrics().height() + 2;
    const auto labelled = static_cast<int>(std::count_if(
        l.bands.begin(), l.bands.end(), [](const Band& band) { return !band.label.isEmpty(); }));
    const int widest = std::max(1, g.area.width());
    int one_pixel_rows = 0;
    for (const Band& band : l.bands) {
        one_pixel_rows += (static_cast<int>(band.blocks.size()) + widest - 1) / widest;
    }
    if (labelled * label_height + one_pixel_rows > g.area.height()) {
        label_height = 0;
        for (Band& band : l.bands) {
            band.label.clear();
        }
    }
    const auto height_of = [&](int cell, int columns) {
        int height = 0;
        for (const Band& band : l.bands) {
            const auto count = static_cast<int>(band.blocks.size());
            height +=
                (band.label.isEmpty() ? 0 : label_height) + (count + columns - 1) / columns * cell;
        }
        return height;
    };
    // The largest squares with which every block fits.
    for (int cell = kMaxCell; cell >= 1; --cell) {
        const int columns = g.area.width() / cell;
        if (columns < 1) {
            continue;
        }
        if (height_of(cell, columns) <= g.area.height() || cell == 1) {
            g.cell = cell;
            g.columns = columns;
            break;
        }
    }
    g.gap = g.cell >= 6 ? 1 : 0;
    if (g.cell == 0) {
        return l;
    }
    l.squares.assign(static_cast<std::size_t>(n), QRect());
    int top = g.area.top();
    for (const Band& band : l.bands) {
        if (!band.label.isEmpty()) {
            l.labels.push_back(QRect(g.area.left(), top, g.area.width(), label_height));
            top += label_height;
        } else {
            l.labels.push_back(QRect());
        }
        for (std::size_t i = 0; i < band.blocks.size(); ++i) {
            const auto position = static_cast<int>(i);
            const QRect square(g.area.left() + (position % g.columns) * g.cell,
                               top + (position / g.columns) * g.cell, g.cell - g.gap,
                               g.cell - g.gap);
            // Past the bottom only when even one-pixel squares do not fit.
            if (square.bottom() <= g.area.bottom()) {
                l.squares[static_cast<std::size_t>(band.blocks[i])] = square;
            }
        }
        top += (static_cast<int>(band.blocks.size()) + g.columns - 1) / g.columns * g.cell;
    }
    return l;
}

QStringList BlockMapView::band_labels() const {
    QStringList labels;
    for (const Band& band : bands()) {
        if (!band.label.isEmpty()) {
            labels << band.label;
        }
    }
    return labels;
}

QStringList BlockMapView::legend_entries() const {
    QStringList entries;
    for (const LegendItem& item : legend_items()) {
        entries << item.text;
    }
    return entries;
}

QRect BlockMapView::block_rect(int block) const {
    const Layout l = layout();
    if (block < 0 || static_cast<std::size_t>(block) >= l.squares.size()) {
        return {};
    }
    return l.squares[static_cast<std::size_t>(block)];
}

int BlockMapView::block_at(QPoint pos) const {
    const Layout l = layout();
    if (l.grid.cell == 0 || !l.grid.area.contains(pos)) {
        return -1;
    }
    for (std::size_t block = 0; block < l.squares.size(); ++block) {
        // The square and the gap after it, so no pixel between falls through.
        const QRect& square = l.squares[block];
        if (square.isValid() && square.adjusted(0, 0, l.grid.gap, l.grid.gap).contains(pos)) {
            return static_cast<int>(block);
        }
    }
    return -1;
}

QString BlockMapView::tooltip_for_block(int block) const {
    const profiler::BlockMapState* s = state();
    if (s == nullptr || block < 0 || block >= block_count()) {
        return {};
    }
    const auto index = static_cast<std::size_t>(block);
    const BlockState& b = index < s->blocks().size() ? s->blocks()[index] : free_block();
    QStringList lines;
    lines << QString("<b>Block %1</b>").arg(block);
    lines << QString("State: %1").arg(state_text(b));
    if (b.hashed) {
        lines << QString("Hash: 0x%1").arg(static_cast<qulonglong>(b.hash), 16, 16, QChar('0'));
    }
    if (store_->kv_group_count() > 1 && b.use() != BlockUse::free &&
        static_cast<std::size_t>(b.group) < store_->kv_groups().size()) {
        const std::int32_t window = store_->kv_groups()[static_cast<std::size_t>(b.group)].window;
        lines << QString("KV group %1 (%2)")
                     .arg(b.group)
                     .arg(window > 0 ? QString("window of %1 positions").arg(window)
                                     : QString("whole context"));
    }
    lines << QString("Ref count: %1").arg(b.ref_count());
    if (!b.owners.empty()) {
        QStringList owners;
        for (const std::int64_t owner : b.owners) {
            owners << QString::number(owner);
        }
        lines << QString("Owners: %1").arg(owners.join(", "));
    }

    // Which tokens it holds: a cached block says so itself; an unhashed one
    // holds its place in its first owner's block table.
    const std::int64_t block_size = s->block_size();
    std::int64_t request = -1;
    std::int64_t first = 0;
    std::int64_t last = 0;
    bool filling = false;
    if (b.hashed && b.cached_by >= 0 && b.first_token >= 0) {
        request = b.cached_by;
        first = b.first_token;
        last = first + block_size;
    } else if (!b.owners.empty()) {
        const int position = s->table_index(b.owners.front(), block);
        const profiler::RequestRecord* owner = store_->request(b.owners.front());
        // Once token eviction has compacted a request's cache, a block's
        // place in its table no longer says which tokens it holds.
        const bool compacted = b.entries >= 0 || (owner != nullptr && owner->evicted_tokens > 0);
        if (compacted) {
            lines << QString("Cache entries of request %1 (token eviction has moved them; "
                             "positions unknown)")
                         .arg(b.owners.front());
        } else if (position >= 0) {
            request = b.owners.front();
            first = position * block_size;
            last = first + block_size;
            filling = true;
        }
    }
    if (request >= 0) {
        const profiler::RequestRecord* r = store_->request(request);
        if (filling && r != nullptr) {
            last = std::max(first, std::min(last, tokens_at(*r, time_ns_)));
        }
        lines << QString("Tokens %1\u2013%2 of request %3").arg(first).arg(last).arg(request);
        const std::string text = r != nullptr ? r->text(first, last) : std::string();
        if (!text.empty()) {
            lines << QString("\u201c%1\u201d").arg(displayable_text(text));
        }
    }
    lines << QString("Reuses: %1").arg(b.reuses);
    if (b.entries >= 0) {
        lines << QString("Entries: %1 of %2 (after token eviction)").arg(b.entries).arg(block_size);
    }
    if (b.rolled_back > 0) {
        lines << QString("%1 slots rolled back: draft tokens verification rejected (the next "
                         "step writes over them)")
                     .arg(b.rolled_back);
    }
    if (b.tier == BlockState::Tier::loaded) {
        lines << QString("Loaded back from the offload tier instead of computed");
    } else if (b.tier == BlockState::Tier::saved) {
        lines << QString("Also in the offload tier (written through)");
    }
    return lines.join("<br/>");
}

QSize BlockMapView::sizeHint() const {
    return QSize(640, 420);
}

QSize BlockMapView::minimumSizeHint() const {
    return QSize(160, 100);
}

bool BlockMapView::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        const auto* help = static_cast<QHelpEvent*>(event);
        const int block = block_at(help->pos());
        if (block >= 0) {
            QToolTip::showText(help->globalPos(), tooltip_for_block(block), this,
                               block_rect(block));
        } else {
            QToolTip::hideText();
            event->ignore();
        }
        return true;
    }
    return QWidget::event(event);
}

void BlockMapView::mousePressEvent(QMouseEvent* event) {
    const int block =
        event->button() == Qt::LeftButton ? block_at(event->position().toPoint()) : -1;
    const profiler::BlockMapState* s = state();
    if (block < 0 || s == nullptr || static_cast<std::size_t>(block) >= s->blocks().size()) {
        QWidget::mousePressEvent(event);
        return;
    }
    const BlockState& b = s->blocks()[static_cast<std::size_t>(block)];
    if (!b.owners.empty()) {
        emit request_selected(b.owners.front());
    } else if (b.hashed && b.cached_by >= 0) {
        emit request_selected(b.cached_by);
    }
    event->accept();
}

void BlockMapView::paint_block(QPainter& painter, const QRect& square, const BlockState& b) const {
    paint_use(painter, square, b);
    if (square.width() < 5) {
        return; // too small for marks to read
    }
    if (b.rolled_back > 0) {
        // A band along the bottom, as tall as the share of slots rolled back.
        const int block_slots = std::max(1, store_ != nullptr ? store_->block_size() : 16);
        const int height =
            std::max(2, square.height() * std::min(b.rolled_back, block_slots) / block_slots);
        painter.fillRect(QRect(square.left(), square.bottom() - height + 1, square.width(), height),
                         kRolledBack);
    }
    if (b.tier != BlockState::Tier::none) {
        // A corner triangle, top right.
        const int side = std::max(3, square.width() / 3);
        const QPoint corner = square.topRight();
        const QPolygon triangle({corner, corner - QPoint(side, 0), corner + QPoint(0, side)});
        painter.save();
        painter.setPen(Qt::NoPen);
        painter.setBrush(b.tier == BlockState::Tier::loaded ? kTierLoaded : kTierSaved);
        painter.drawPolygon(triangle);
        painter.restore();
    }
}

void BlockMapView::paint_use(QPainter& painter, const QRect& square, const BlockState& b) const {
    switch (b.use()) {
    case BlockUse::free:
        painter.fillRect(square, free_color());
        return;
    case BlockUse::cached:
        painter.fillRect(square, request_tint(b.cached_by));
        if (square.width() >= 4) {
            painter.fillRect(square, QBrush(request_color(b.cached_by), Qt::BDiagPattern));
        }
        return;
    case BlockUse::used:
        break;
    }
    const QColor fill = request_color(b.owners.front());
    painter.fillRect(square, fill);
    if (b.ref_count() < 2) {
        return;
    }
    // Four strips rather than a wide pen: exact pixels at every square size.
    const int border = std::max(1, std::min(square.width() / 5, 4));
    painter.fillRect(QRect(square.left(), square.top(), square.width(), border), kSharedBorder);
    painter.fillRect(QRect(square.left(), square.bottom() - border + 1, square.width(), border),
                     kSharedBorder);
    painter.fillRect(QRect(square.left(), square.top(), border, square.height()), kSharedBorder);
    painter.fillRect(QRect(square.right() - border + 1, square.top(), border, square.height()),
                     kSharedBorder);
    if (square.width() >= kMinSquareForText) {
        painter.setPen(fill.lightness() > 140 ? Qt::black : Qt::white);
        painter.drawText(square, Qt::AlignCenter, QString::number(b.ref_count()));
    }
}

void BlockMapView::paint_swatch(QPainter& painter, const QRect& swatch, int kind) const {
    switch (kind) {
    case used_swatch: {
        // Three stripes: the colour changes with the request.
        const int third = swatch.width() / 3;
        for (int i = 0; i < 3; ++i) {
            const int w = i == 2 ? swatch.width() - 2 * third : third;
            painter.fillRect(QRect(swatch.left() + i * third, swatch.top(), w, swatch.height()),
                             request_color(i));
        }
        break;
    }
    case shared_swatch: {
        BlockState shared;
        shared.owners = {0, 1};
        paint_block(painter, swatch, shared);
        break;
    }
    case cached_swatch: {
        BlockState cached;
        cached.hashed = true;
        cached.cached_by = 0;
        paint_block(painter, swatch, cached);
        break;
    }
    case free_swatch:
        painter.fillRect(swatch, free_color());
        break;
    case rolled_back_swatch:
    case tier_loaded_swatch:
    case tier_saved_swatch: {
        BlockState marked;
        marked.owners = {0};
        marked.rolled_back = kind == rolled_back_swatch ? 1 << 20 : 0;
        marked.tier = kind == tier_loaded_swatch  ? BlockState::Tier::loaded
                      : kind == tier_saved_swatch ? BlockState::Tier::saved
                                                  : BlockState::Tier::none;
        paint_block(painter, swatch, marked);
        break;
    }
    default:
        break;
    }
}

void BlockMapView::paint_legend(QPainter& painter, const QRect& area) const {
    const std::vector<LegendItem> items = legend_items();
    std::vector<QString> texts;
    for (const LegendItem& item : items) {
        texts.push_back(item.text);
    }
    const QFontMetrics metrics = fontMetrics();
    const std::vector<QRect> rects = legend_layout(metrics, texts, area.width());
    const int swatch = metrics.height() - 2;
    painter.setPen(palette().color(QPalette::WindowText));
    for (std::size_t i = 0; i < items.size(); ++i) {
        const QRect r = rects[i].translated(area.topLeft());
        int text_left = r.left();
        if (items[i].kind != no_swatch) {
            paint_swatch(painter,
                         QRect(r.left(), r.top() + (r.height() - swatch) / 2, swatch, swatch),
                         items[i].kind);
            painter.setPen(palette().color(QPalette::WindowText));
            text_left += swatch + 4;
        }
        painter.drawText(QRect(text_left, r.top(), r.right() - text_left + 1, r.height()),
                         Qt::AlignLeft | Qt::AlignVCenter, items[i].text);
    }
}

// A big cache (a GPU's can hold 100,000 blocks) gets squares of a few
// pixels, where one painter call per block would take most of a frame: their
// pixels are written into an image drawn at once. The same pixels as
// paint_block() draws at these sizes (no hatch, no text; a shared block's
// border is its outer ring).
void BlockMapView::paint_tiny_blocks(QPainter& painter, const Layout& l,
                                     const profiler::BlockMapState& s) const {
    const Grid& g = l.grid;
    const int side = g.cell - g.gap;
    QImage image(g.area.size(), QImage::Format_RGB32);
    image.fill(palette().color(QPalette::Base));
    const QRgb free_rgb = free_color().rgb();
    const QRgb border_rgb = kSharedBorder.rgb();
    const std::vector<BlockState>& blocks = s.blocks();
    for (std::size_t index = 0; index < l.squares.size(); ++index) {
        const QRect& square = l.squares[index];
        if (!square.isValid()) {
            continue;
        }
        const BlockState& b = index < blocks.size() ? blocks[index] : free_block();
        QRgb fill = free_rgb;
        bool shared = false;
        switch (b.use()) {
        case BlockUse::cached:
            fill = request_tint(b.cached_by).rgb();
            break;
        case BlockUse::used:
            fill = request_color(b.owners.front()).rgb();
            shared = b.ref_count() > 1;
            break;
        case BlockUse::free:
            break;
        }
        const int x0 = square.left() - g.area.left();
        const int y0 = square.top() - g.area.top();
        for (int dy = 0; dy < side; ++dy) {
            auto* line = reinterpret_cast<QRgb*>(image.scanLine(y0 + dy)) + x0;
            const bool edge_row = dy == 0 || dy == side - 1;
            for (int dx = 0; dx < side; ++dx) {
                const bool edge = edge_row || dx == 0 || dx == side - 1;
                line[dx] = shared && edge ? border_rgb : fill;
            }
        }
    }
    painter.drawImage(g.area.topLeft(), image);
}

void BlockMapView::paintEvent(QPaintEvent* event) {
    QPainter painter(this);
    painter.fillRect(rect(), palette().color(QPalette::Base));
    const profiler::BlockMapState* s = state();
    const Layout l = layout();
    const Grid& g = l.grid;
    if (s == nullptr || g.cell == 0) {
        painter.setPen(palette().color(QPalette::PlaceholderText));
        painter.drawText(rect(), Qt::AlignCenter,
                         store_ == nullptr ? QString("No run") : QString("No KV-cache blocks yet"));
        return;
    }
    if (g.cell - g.gap <= kMaxTinySquare) {
        paint_tiny_blocks(painter, l, *s);
    }
    // The bands' labels (a hybrid cache's groups), in the widget's font.
    painter.setPen(palette().color(QPalette::Text));
    for (std::size_t band = 0; band < l.bands.size(); ++band) {
        if (l.labels[band].isValid() && event->rect().intersects(l.labels[band])) {
            painter.drawText(l.labels[band], Qt::AlignLeft | Qt::AlignVCenter, l.bands[band].label);
        }
    }
    if (g.cell - g.gap >= kMinSquareForText) {
        QFont font = painter.font();
        font.setPixelSize(std::max(8, (g.cell - g.gap) / 2));
        font.setBold(true);
        painter.setFont(font);
    }
    const std::vector<BlockState>& blocks = s->blocks();
    for (std::size_t index = 0; index < l.squares.size() && g.cell - g.gap > kMaxTinySquare;
         ++index) {
        const QRect& square = l.squares[index];
        if (!square.isValid() || !event->rect().intersects(square)) {
            continue;
        }
        paint_block(painter, square, index < blocks.size() ? blocks[index] : free_block());
    }
    painter.setFont(font());
    const QRect content = rect().adjusted(kMargin, kMargin, -kMargin, -kMargin);
    const int legend = legend_height(content.width());
    paint_legend(painter,
                 QRect(content.left(), content.bottom() - legend + 1, content.width(), legend));
}

} // namespace kvscope::ui
