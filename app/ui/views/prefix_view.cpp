#include "app/ui/views/prefix_view.h"

#include "app/ui/export/plot_export.h"
#include "app/ui/models/prefix_tree_model.h"
#include "app/ui/views/chart_series.h"
#include "app/ui/views/wrapping_legend.h"
#include "profiler/store/run_store.h"

#include <algorithm>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QFontMetricsF>
#include <QHeaderView>
#include <QHorizontalStackedBarSeries>
#include <QLineSeries>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>
#include <QValueAxis>

namespace kvscope::ui {
namespace {

const QColor kCachedColour(242, 193, 78);
const QColor kComputedColour(76, 120, 168);

// The tab these charts live in is short at 1440x900 (the README's size):
// no margins, and a legend that wraps (WrappingLegend) or none where the
// title names the one series, leave their axes the room to be read.
QChartView* chart_view(QChart* chart, QWidget* parent) {
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->setMargins(QMargins(0, 0, 0, 0));
    chart->legend()->hide();
    auto* view = new QChartView(chart, parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumHeight(150);
    // The owning view offers the context menu (plot export).
    view->setContextMenuPolicy(Qt::NoContextMenu);
    return view;
}

} // namespace

PrefixView::PrefixView(QWidget* parent)
    : QWidget(parent)
    , requests_chart_(new QChart)
    , hit_rate_chart_(new QChart)
    , tree_model_(new PrefixTreeModel(this)) {
    create_requests_chart();
    create_hit_rate_chart();

    tree_view_ = new QTreeView(this);
    tree_view_->setModel(tree_model_);
    tree_view_->setUniformRowHeights(true);
    tree_view_->setAlternatingRowColors(true);
    tree_view_->header()->setStretchLastSection(false);
    tree_view_->header()->setSectionResizeMode(PrefixTreeModel::text_column, QHeaderView::Stretch);
    tree_view_->setColumnWidth(PrefixTreeModel::block_column, 60);
    tree_view_->setColumnWidth(PrefixTreeModel::reuses_column, 60);
    tree_view_->setColumnWidth(PrefixTreeModel::cached_at_column, 90);
    tree_view_->setColumnWidth(PrefixTreeModel::status_column, 140);
    connect(tree_view_, &QTreeView::clicked, this, [this](const QModelIndex& index) {
        emit request_selected(index.data(PrefixTreeModel::request_role).toLongLong());
    });

    auto* charts = new QSplitter(Qt::Horizontal);
    auto* requests = new QWidget(charts);
    auto* requests_layout = new QVBoxLayout(requests);
    requests_layout->setContentsMargins(0, 0, 0, 0);
    requests_layout->setSpacing(0);
    requests_layout->addWidget(chart_view(requests_chart_, requests), 1);
    requests_legend_ = new WrappingLegend(requests_chart_, requests);
    requests_legend_->refresh();
    requests_layout->addWidget(requests_legend_);
    charts->addWidget(requests);
    charts->addWidget(chart_view(hit_rate_chart_, charts));
    // The request ids only where each bar is tall enough for one.
    connect(requests_chart_, &QChart::plotAreaChanged, this, &PrefixView::fit_request_labels);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(charts);
    split->addWidget(tree_view_);
    // Charts need height for their axes; the tree scrolls.
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 1);
    split->setSizes({480, 120});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(split);
    setObjectName("prefix_caching");
    add_export_menu(this);
}

void PrefixView::create_requests_chart() {
    requests_chart_->setTitle(
        QString("Prompt tokens per request (last %1 admitted)").arg(kMaxRequests));
    cached_set_ = new QBarSet("Cached");
    cached_set_->setColor(kCachedColour);
    cached_set_->setBorderColor(kCachedColour.darker(130));
    computed_set_ = new QBarSet("Computed");
    computed_set_->setColor(kComputedColour);
    computed_set_->setBorderColor(kComputedColour.darker(130));
    bars_ = new QHorizontalStackedBarSeries(requests_chart_);
    bars_->append(cached_set_);
    bars_->append(computed_set_);
    bars_->setBarWidth(0.8);
    requests_chart_->addSeries(bars_);

    request_axis_ = new QBarCategoryAxis(requests_chart_);
    // No title: the chart's says "per request", and a vertical one is cut
    // in the short tab.
    tokens_axis_ = new QValueAxis(requests_chart_);
    tokens_axis_->setTitleText("Prompt tokens");
    tokens_axis_->setLabelFormat("%d");
    requests_chart_->addAxis(request_axis_, Qt::AlignLeft);
    requests_chart_->addAxis(tokens_axis_, Qt::AlignBottom);
    bars_->attachAxis(request_axis_);
    bars_->attachAxis(tokens_axis_);

    // A bar's index is its row in bar_rows_.
    const auto select = [this](int index) {
        if (index >= 0 && static_cast<std::size_t>(index) < bar_rows_.size()) {
            emit request_selected(bar_rows_[static_cast<std::size_t>(index)].request);
        }
    };
    connect(cached_set_, &QBarSet::clicked, this, select);
    connect(computed_set_, &QBarSet::clicked, this, select);
}

void PrefixView::create_hit_rate_chart() {
    hit_rate_chart_->setTitle("Prefix hit rate (hit tokens / prompt tokens)");
    hit_rate_ = new QLineSeries(hit_rate_chart_);
    hit_rate_->setName("Prefix hit rate (%)");
    hit_rate_->setPen(QPen(kCachedColour.darker(140), 2));
    hit_rate_chart_->addSeries(hit_rate_);
    hit_time_axis_ = new QValueAxis(hit_rate_chart_);
    hit_time_axis_->setTitleText("Time (s)");
    hit_time_axis_->setLabelFormat("%.3g");
    auto* percent = new QValueAxis(hit_rate_chart_);
    percent->setTitleText("Hit rate (%)");
    percent->setRange(0, 100);
    percent->setLabelFormat("%d");
    hit_rate_chart_->addAxis(hit_time_axis_, Qt::AlignBottom);
    hit_rate_chart_->addAxis(percent, Qt::AlignLeft);
    hit_rate_->attachAxis(hit_time_axis_);
    hit_rate_->attachAxis(percent);
    hit_cursor_ = add_time_cursor(hit_rate_chart_, hit_time_axis_, percent);
}

void PrefixView::set_store(const profiler::RunStore* store) {
    store_ = store;
    shown_hit_samples_ = 0;
    tree_events_ = -1;
    // Nothing of the previous store may be taken over (texts, rows).
    tree_model_->set_snapshot({});
    update_all();
}

void PrefixView::set_time_ns(qint64 t_ns) {
    if (t_ns == time_ns_) {
        return;
    }
    time_ns_ = t_ns;
    update_all();
}

void PrefixView::refresh() {
    update_all();
}

void PrefixView::update_all() {
    update_requests();
    update_hit_rate();
    update_tree();
}

std::vector<qint64> PrefixView::shown_requests() const {
    std::vector<qint64> ids;
    for (const BarRow& row : bar_rows_) {
        ids.push_back(row.request);
    }
    return ids;
}

void PrefixView::update_requests() {
    std::vector<const profiler::RequestRecord*> admitted;
    if (store_ != nullptr) {
        for (const profiler::RequestRecord& r : store_->requests()) {
            if (r.admitted_ns >= 0 && r.admitted_ns <= time_ns_) {
                admitted.push_back(&r);
            }
        }
    }
    // Requests are stored by arrival; the chart goes by admission.
    std::stable_sort(admitted.begin(), admitted.end(),
                     [](const profiler::RequestRecord* a, const profiler::RequestRecord* b) {
                         return a->admitted_ns < b->admitted_ns;
                     });
    if (admitted.size() > kMaxRequests) {
        admitted.erase(admitted.begin(),
                       admitted.end() - static_cast<std::ptrdiff_t>(kMaxRequests));
    }
    std::vector<BarRow> rows;
    rows.reserve(admitted.size());
    for (const profiler::RequestRecord* r : admitted) {
        rows.push_back({r->id, r->cached_tokens, r->computed_tokens});
    }
    if (rows == bar_rows_) {
        return;
    }
    bar_rows_ = std::move(rows);

    QList<qreal> cached;
    QList<qreal> computed;
    QStringList categories;
    int widest = 1;
    for (const BarRow& row : bar_rows_) {
        cached.append(row.cached);
        computed.append(row.computed);
        categories.append(QString("#%1").arg(row.request));
        widest = std::max(widest, row.cached + row.computed);
    }
    cached_set_->remove(0, cached_set_->count());
    cached_set_->append(cached);
    computed_set_->remove(0, computed_set_->count());
    computed_set_->append(computed);
    request_axis_->setCategories(categories);
    tokens_axis_->setRange(0, widest);
    tokens_axis_->applyNiceNumbers();
    fit_request_labels();
}

void PrefixView::fit_request_labels() {
    const qreal per_bar = requests_chart_->plotArea().height() /
                          std::max<qreal>(1, static_cast<qreal>(bar_rows_.size()));
    request_axis_->setLabelsVisible(per_bar >= QFontMetricsF(request_axis_->labelsFont()).height());
}

void PrefixView::update_hit_rate() {
    if (store_ == nullptr) {
        hit_rate_->clear();
        hit_cursor_->clear();
        hit_time_axis_->setRange(0, 1);
        return;
    }
    const profiler::CounterTrack& track = store_->counter(profiler::Counter::prefix_hit_rate);
    if (track.t_ns.size() != shown_hit_samples_) {
        hit_rate_->replace(counter_points(track, store_->start_ns(), 100.0));
        shown_hit_samples_ = track.t_ns.size();
    }
    const double end_s = std::max(1e-3, seconds_since(store_->start_ns(), store_->end_ns()));
    if (hit_time_axis_->max() != end_s) {
        set_time_range(hit_time_axis_, end_s);
    }
    if (store_->event_count() == 0) {
        hit_cursor_->clear();
        return;
    }
    const qint64 t = std::clamp<qint64>(time_ns_, store_->start_ns(), store_->end_ns());
    move_time_cursor(hit_cursor_, seconds_since(store_->start_ns(), t), 0, 100);
}

void PrefixView::update_tree() {
    if (store_ == nullptr) {
        return; // emptied by set_store
    }
    // Hits change counts without adding nodes, so any new event may matter.
    if (tree_events_ == store_->event_count() && tree_time_ns_ == time_ns_) {
        return;
    }
    const bool fresh = tree_events_ < 0;
    tree_model_->set_snapshot(
        prefix_tree_snapshot(*store_, time_ns_, fresh ? nullptr : &tree_model_->snapshot()));
    tree_events_ = store_->event_count();
    tree_time_ns_ = time_ns_;
}

} // namespace kvscope::ui
