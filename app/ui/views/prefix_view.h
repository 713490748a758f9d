// What prefix caching saved, at the moment shown: per request, how many
// prompt tokens came from the cache and how many were computed; the prefix
// hit rate over time; and the tree of cached prefixes with their reuse.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include <QWidget>

class QBarCategoryAxis;
class QBarSet;
class QChart;
class QHorizontalStackedBarSeries;
class QLineSeries;
class QTreeView;
class QValueAxis;

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

class PrefixTreeModel;
class WrappingLegend;

class PrefixView : public QWidget {
    Q_OBJECT
public:
    // Requests in the bar chart: the latest admitted, so bars stay readable.
    static constexpr std::size_t kMaxRequests = 64;

    explicit PrefixView(QWidget* parent = nullptr);

    // The store is not owned; null shows nothing.
    void set_store(const profiler::RunStore* store);
    // Shows requests admitted and prefixes cached by `t_ns` (until called: the latest).
    void set_time_ns(qint64 t_ns);
    // The store grew (live): takes in what is new.
    void refresh();

    qint64 time_ns() const { return time_ns_; }
    // Requests in the bar chart, in admission order (bottom to top).
    std::vector<qint64> shown_requests() const;
    // Bar sets "Cached" and "Computed"; categories "#<request id>".
    QChart* requests_chart() const { return requests_chart_; }
    // Series "Prefix hit rate (%)" and "Shown time".
    QChart* hit_rate_chart() const { return hit_rate_chart_; }
    PrefixTreeModel* tree_model() const { return tree_model_; }
    QTreeView* tree_view() const { return tree_view_; }

signals:
    // A request picked by clicking its bar or a prefix it cached.
    void request_selected(qint64 request);

private:
    struct BarRow {
        qint64 request = -1;
        int cached = 0;
        int computed = 0;
        bool operator==(const BarRow&) const = default;
    };

    void create_requests_chart();
    void create_hit_rate_chart();
    void update_all();
    void update_requests();
    void update_hit_rate();
    void update_tree();
    // Shows the requests' ids beside their bars only when each bar is as
    // tall as a label (else Qt Charts cuts each to "...").
    void fit_request_labels();

    const profiler::RunStore* store_ = nullptr;
    qint64 time_ns_ = std::numeric_limits<qint64>::max(); // the latest until set
    std::vector<BarRow> bar_rows_;
    std::size_t shown_hit_samples_ = 0;
    qint64 tree_events_ = -1; // the store's event count the tree was built from
    qint64 tree_time_ns_ = 0;

    QChart* requests_chart_ = nullptr;
    QHorizontalStackedBarSeries* bars_ = nullptr;
    QBarSet* cached_set_ = nullptr;
    QBarSet* computed_set_ = nullptr;
    QBarCategoryAxis* request_axis_ = nullptr;
    QValueAxis* tokens_axis_ = nullptr;
    WrappingLegend* requests_legend_ = nullptr; // "Cached", "Computed"

    QChart* hit_rate_chart_ = nullptr;
    QLineSeries* hit_rate_ = nullptr;
    QLineSeries* hit_cursor_ = nullptr;
    QValueAxis* hit_time_axis_ = nullptr;

    PrefixTreeModel* tree_model_ = nullptr;
    QTreeView* tree_view_ = nullptr;
};

} // namespace kvscope::ui
