#include "app/ui/views/attached_blocks_view.h"

#include "app/ui/views/request_colors.h"
#include "app/ui/workers/free_on_worker.h"
#include "profiler/store/run_store.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <QDateTime>
#include <QHelpEvent>
#include <QImage>
#include <QPainter>
#include <QToolTip>

namespace kvscope::ui {
namespace {

constexpr int kMargin = 6;
constexpr int kTitleHeight = 18;
constexpr int kSectionGap = 8;
constexpr int kMaxCell = 16;
const QColor kFreeColor(0xdc, 0xdc, 0xdc);

QString short_hash(const attach::BlockHash& hash) {
    const std::string hex = hash.hex();
    return QString::fromStdString(hex.size() > 20 ? hex.substr(0, 18) + "…" : hex);
}

} // namespace

AttachedBlocksView::AttachedBlocksView(QWidget* parent)
    : QWidget(parent)
    , builds_(this, [this](Built built, qint64 cost_ms) {
        free_on_worker(std::exchange(state_, std::move(built.state)));
        sections_ = std::move(built.sections);
        live_rebuilds_.ran(cost_ms);
        lay_out();
        update();
    }) {
    setObjectName("attachedBlocksView");
    setMouseTracking(true);
}

QString AttachedBlocksView::caveat() {
    return tr("Attached engines' KV events name blocks by hash: squares are placed by kvscope, "
              "tree by tree; the engine's block ids, the requests using a block, reference "
              "counts and partly filled blocks are not in the events.");
}

void AttachedBlocksView::set_store(const profiler::RunStore* store) {
    store_ = store;
    time_ns_ = std::numeric_limits<qint64>::max();
    showing_past_ = false;
    rebuild();
}

void AttachedBlocksView::set_time_ns(qint64 t_ns) {
    time_ns_ = t_ns;
    showing_past_ = store_ != nullptr && t_ns < store_->end_ns();
    rebuild();
}

void AttachedBlocksView::refresh() {
    // While a build runs, the next waits for its end (and its cost); a
    // state already shown is not laid out again.
    if (!showing_past_ && !builds_.busy() && live_rebuilds_.due() &&
        (store_ == nullptr || store_->attached().shared_state() != state_)) {
        rebuild();
    }
}

const attach::AttachedState& AttachedBlocksView::state() const {
    static const attach::AttachedState empty;
    return state_ ? *state_ : empty;
}

void AttachedBlocksView::rebuild() {
    // state_at() is the newest state from the last row's time on.
    std::shared_ptr<const attach::AttachedState> state =
        store_ != nullptr ? store_->attached().state_at(time_ns_)
                          : std::make_shared<const attach::AttachedState>();
    const std::size_t blocks = state->resident_blocks();
    builds_.request(
        [state] {
            return Built{state, build_sections(*state)};
        },
        blocks <= kInlineBlocks);
}

std::vector<AttachedBlocksView::Section>
AttachedBlocksView::build_sections(const attach::AttachedState& state) {
    std::vector<Section> sections;
    for (const auto& [id, source] : state.sources()) {
        for (const auto& [key, tier] : source.blocks.tiers()) {
            Section section;
            section.source = id;
            section.tier = key;
            const auto order = source.blocks.in_tree_order(key);
            section.cells.reserve(order.size());
            for (const auto& [hash, tree] : order) {
                section.cells.push_back({hash, tree});
            }
            const std::size_t resident = section.cells.size();
            // The capacity (given, or the engine's vllm:cache_config_info) is
            // its GPU pool; other tiers' sizes are not known.
            const std::int64_t capacity = key.medium == "GPU" ? source.capacity_blocks() : 0;
            if (capacity > static_cast<std::int64_t>(resident)) {
                section.cells.resize(static_cast<std::size_t>(capacity));
            }
            section.title = capacity > 0 ? tr("source %1 · rank %2 · %3: %4 of %5 blocks resident")
                                               .arg(id)
                                               .arg(key.rank)
                                               .arg(QString::fromStdString(key.medium))
                                               .arg(resident)
                                               .arg(capacity)
                                         : tr("source %1 · rank %2 · %3: %4 blocks resident")
                                               .arg(id)
                                               .arg(key.rank)
                                               .arg(QString::fromStdString(key.medium))
                                               .arg(resident);
            sections.push_back(std::move(section));
        }
        if (source.blocks.tiers().empty()) {
            Section section;
            section.source = id;
            section.title = tr("source %1: no blocks resident").arg(id);
            sections.push_back(std::move(section));
        }
    }
    return sections;
}

void AttachedBlocksView::lay_out() {
    const QRect area = rect().adjusted(kMargin, kMargin, -kMargin, -kMargin);
    const QFontMetrics metrics(font());
    const int caveat_height =
        metrics.boundingRect(QRect(0, 0, area.width(), 1000), Qt::TextWordWrap, caveat()).height();
    caveat_rect_ =
        QRect(area.left(), area.bottom() - caveat_height + 1, area.width(), caveat_height);
    const int room = std::max(1, area.height() - caveat_height - kSectionGap);
    // The largest square size at which every section fits.
    cell_ = 1;
    for (int size = kMaxCell; size >= 1; --size) {
        const int columns = std::max(1, area.width() / size);
        long long height = 0;
        for (const Section& s : sections_) {
            const auto cells = static_cast<long long>(s.cells.size());
            height += kTitleHeight + ((cells + columns - 1) / columns) * size + kSectionGap;
        }
        if (height <= room) {
            cell_ = size;
            break;
        }
    }
    const int columns = std::max(1, area.width() / cell_);
    int y = area.top();
    for (Section& s : sections_) {
        s.title_rect = QRect(area.left(), y, area.width(), kTitleHeight);
        y += kTitleHeight;
        const int rows = (static_cast<int>(s.cells.size()) + columns - 1) / columns;
        s.columns = columns;
        s.grid_rect = QRect(area.left(), y, columns * cell_, rows * cell_);
        y += rows * cell_ + kSectionGap;
    }
    grids_.clear();
}

void AttachedBlocksView::draw_grids() {
    // Pixels written straight into each section's image: 160,000 fillRect
    // calls took longer than a frame.
    const QRgb base = palette().color(QPalette::Base).rgb();
    const QRgb free = kFreeColor.rgb();
    const int gap = cell_ >= 6 ? 1 : 0;
    const int inner = cell_ - gap;
    std::vector<QRgb> tree_colors;
    grids_.clear();
    for (const Section& s : sections_) {
        QImage image(s.grid_rect.size(), QImage::Format_RGB32);
        image.fill(base);
        for (std::size_t i = 0; i < s.cells.size(); ++i) {
            const std::int32_t tree = s.cells[i].tree;
            QRgb color = free;
            if (tree >= 0) {
                const auto t = static_cast<std::size_t>(tree);
                while (tree_colors.size() <= t) {
                    tree_colors.push_back(
                        request_color(static_cast<int>(tree_colors.size())).rgb());
                }
                color = tree_colors[t];
            }
            const int x = static_cast<int>(i) % s.columns * cell_;
            const int y = static_cast<int>(i) / s.columns * cell_;
            for (int line = y; line < y + inner && line < image.height(); ++line) {
                auto* pixels = reinterpret_cast<QRgb*>(image.scanLine(line));
                std::fill(pixels + x, pixels + std::min(x + inner, image.width()), color);
            }
        }
        grids_.push_back(std::move(image));
    }
}

void AttachedBlocksView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    lay_out();
}

std::pair<int, int> AttachedBlocksView::cell_at(QPoint pos) const {
    for (std::size_t i = 0; i < sections_.size(); ++i) {
        const Section& s = sections_[i];
        if (!s.grid_rect.contains(pos)) {
            continue;
        }
        const int column = (pos.x() - s.grid_rect.left()) / cell_;
        const int row = (pos.y() - s.grid_rect.top()) / cell_;
        const int index = row * s.columns + column;
        if (index >= 0 && index < static_cast<int>(s.cells.size())) {
            return {static_cast<int>(i), index};
        }
    }
    return {-1, -1};
}

QString AttachedBlocksView::tooltip_for(int section, int cell) const {
    if (section < 0 || section >= static_cast<int>(sections_.size())) {
        return {};
    }
    const Section& s = sections_[static_cast<std::size_t>(section)];
    if (cell < 0 || cell >= static_cast<int>(s.cells.size())) {
        return {};
    }
    const Cell& c = s.cells[static_cast<std::size_t>(cell)];
    if (c.tree < 0) {
        return tr("Free capacity (not holding a cached block, as far as the events tell)");
    }
    const attach::AttachedState::Source* source = state().source(s.source);
    const attach::ResidentBlock* block =
        source != nullptr ? source->blocks.find(s.tier, c.hash) : nullptr;
    if (block == nullptr) {
        return {};
    }
    QString text = tr("<b>Block %1</b><br>source %2, rank %3, %4")
                       .arg(QString::fromStdString(block->hash.hex()).toHtmlEscaped())
                       .arg(s.source)
                       .arg(s.tier.rank)
                       .arg(QString::fromStdString(s.tier.medium).toHtmlEscaped());
    text += block->parent ? tr("<br>continues %1").arg(short_hash(*block->parent))
                          : tr("<br>a prompt's first block");
    text += tr("<br>prefix tree %1").arg(c.tree + 1);
    QStringList ids;
    for (std::size_t i = 0; i < block->token_ids.size() && i < 16; ++i) {
        ids << QString::number(block->token_ids[i]);
    }
    if (block->token_ids.size() > 16) {
        ids << "…";
    }
    text += tr("<br>%1 tokens: [%2]").arg(block->token_ids.size()).arg(ids.join(", "));
    if (block->stored_at > 0) {
        text += tr("<br>stored at %1 (publisher's clock)")
                    .arg(QDateTime::fromMSecsSinceEpoch(
                             static_cast<qint64>(std::llround(block->stored_at * 1e3)))
                             .toString("hh:mm:ss.zzz"));
    }
    return text;
}

bool AttachedBlocksView::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        const auto* help = static_cast<QHelpEvent*>(event);
        const auto [section, cell] = cell_at(help->pos());
        const QString text = tooltip_for(section, cell);
        if (text.isEmpty()) {
            QToolTip::hideText();
        } else {
            QToolTip::showText(help->globalPos(), text, this);
        }
        return true;
    }
    return QWidget::event(event);
}

void AttachedBlocksView::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    painter.fillRect(rect(), palette().color(QPalette::Base));
    if (sections_.empty()) {
        painter.setPen(palette().color(QPalette::PlaceholderText));
        painter.drawText(rect(), Qt::AlignCenter, tr("No attached engine has stored a block yet"));
        return;
    }
    if (grids_.size() != sections_.size()) {
        draw_grids();
    }
    for (std::size_t i = 0; i < sections_.size(); ++i) {
        const Section& s = sections_[i];
        painter.setPen(palette().color(QPalette::WindowText));
        painter.drawText(s.title_rect, Qt::AlignLeft | Qt::AlignVCenter, s.title);
        if (!s.cells.empty()) {
            painter.drawImage(s.grid_rect.topLeft(), grids_[i]);
        }
    }
    painter.setPen(palette().color(QPalette::PlaceholderText));
    painter.drawText(caveat_rect_, Qt::TextWordWrap, caveat());
}

} // namespace kvscope::ui
