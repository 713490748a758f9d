#include "app/ui/panels/simulate_dialog.h"

#include "app/ui/workers/thread_handoff.h"
#include "engine/sim/cost_model.h"
#include "engine/sim/kvscope_trace.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/run_metadata.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <stop_token>

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QScatterSeries>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

namespace kvscope::ui {
namespace {

enum Column {
    column_policy,
    column_blocks,
    column_tokens,
    column_by_blocks,
    column_by_tokens,
    column_per_request,
    column_ttft_p50,
    column_ttft_p99,
    column_preempted,
    column_rejected,
    column_count
};

QString percent(double ratio) {
    return QString::number(100 * ratio, 'f', 2) + " %";
}

} // namespace

SimulateDialog::SimulateDialog(QWidget* parent)
    : QDialog(parent) {
    setObjectName("simulateDialog");
    setWindowTitle(tr("Simulate trace"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(new QLabel(
        tr("Replays a request trace through kvscope's KV manager and scheduler on a cost-model "
           "clock (an 8B model on an H100, estimated): prefix-cache hit ratio and latency at "
           "each KV capacity, as <tt>kvscope simulate</tt> does.")));
    auto* form = new QFormLayout;
    trace_ = new QLineEdit;
    trace_->setObjectName("simulateTrace");
    auto* browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, &SimulateDialog::browse);
    auto* trace_row = new QHBoxLayout;
    trace_row->addWidget(trace_, 1);
    trace_row->addWidget(browse);
    form->addRow(tr("Trace:"), trace_row);
    format_ = new QComboBox;
    for (const sim::TraceFormat f : {sim::TraceFormat::automatic, sim::TraceFormat::mooncake,
                                     sim::TraceFormat::qwen_bailian, sim::TraceFormat::kvscope}) {
        format_->addItem(QString::fromUtf8(sim::trace_format_name(f).data()), static_cast<int>(f));
    }
    form->addRow(tr("Format:"), format_);
    block_size_ = new QSpinBox;
    block_size_->setRange(1, 4096);
    block_size_->setValue(16);
    form->addRow(tr("Block size:"), block_size_);
    capacities_ = new QLineEdit(QStringLiteral("100000"));
    capacities_->setObjectName("simulateCapacities");
    capacities_->setToolTip(tr("KV blocks (of each node); several, comma-separated"));
    sweep_ = new QCheckBox(tr("Sweep: ten, halving down from the first"));
    sweep_->setChecked(true);
    auto* capacity_row = new QHBoxLayout;
    capacity_row->addWidget(capacities_, 1);
    capacity_row->addWidget(sweep_);
    form->addRow(tr("Capacity (blocks):"), capacity_row);
    lru_ = new QCheckBox(tr("LRU"));
    lru_->setChecked(true);
    lfu_ = new QCheckBox(tr("LFU"));
    auto* policy_row = new QHBoxLayout;
    policy_row->addWidget(lru_);
    policy_row->addWidget(lfu_);
    policy_row->addStretch(1);
    form->addRow(tr("Cache policy:"), policy_row);
    nodes_ = new QSpinBox;
    nodes_->setRange(1, 1024);
    router_ = new QComboBox;
    router_->addItem(tr("round-robin"), static_cast<int>(sim::RouterKind::round_robin));
    router_->addItem(tr("cache-aware"), static_cast<int>(sim::RouterKind::cache_aware));
    auto* node_row = new QHBoxLayout;
    node_row->addWidget(nodes_);
    node_row->addWidget(new QLabel(tr("router:")));
    node_row->addWidget(router_, 1);
    form->addRow(tr("Nodes:"), node_row);
    max_requests_ = new QSpinBox;
    max_requests_->setRange(0, 100'000'000);
    max_requests_->setSpecialValueText(tr("the whole trace"));
    form->addRow(tr("Requests:"), max_requests_);
    layout->addLayout(form);

    auto* buttons = new QHBoxLayout;
    run_ = new QPushButton(tr("Replay"));
    run_->setObjectName("simulateRun");
    run_->setDefault(true);
    cancel_ = new QPushButton(tr("Cancel"));
    cancel_->setEnabled(false);
    show_ = new QPushButton(tr("Show in views"));
    show_->setObjectName("simulateShow");
    show_->setToolTip(tr("Record the selected configuration's first %1 requests and open the "
                         "recording")
                          .arg(kRecordedRequests));
    show_->setEnabled(false);
    progress_ = new QProgressBar;
    buttons->addWidget(run_);
    buttons->addWidget(cancel_);
    buttons->addWidget(progress_, 1);
    buttons->addWidget(show_);
    layout->addLayout(buttons);
    status_ = new QLabel;
    status_->setObjectName("simulateStatus");
    status_->setWordWrap(true);
    layout->addWidget(status_);
    connect(run_, &QPushButton::clicked, this, &SimulateDialog::start);
    connect(cancel_, &QPushButton::clicked, this, &SimulateDialog::cancel);
    connect(show_, &QPushButton::clicked, this, [this] {
        const auto rows = table_->selectionModel()->selectedRows();
        show_in_views(rows.isEmpty() ? 0 : rows.front().row());
    });

    chart_ = new QChartView(new QChart);
    chart_->setObjectName("simulateChart");
    chart_->setMinimumHeight(260);
    chart_->chart()->setTitle(tr("Prefix-cache hit ratio (by tokens) against KV capacity"));
    layout->addWidget(chart_, 1);
    table_ = new QTableWidget(0, column_count);
    table_->setObjectName("simulateTable");
    table_->setHorizontalHeaderLabels({tr("Policy"), tr("Blocks"), tr("Tokens"), tr("Hit (blocks)"),
                                       tr("Hit (tokens)"), tr("Hit (per request)"),
                                       tr("TTFT p50 (s)"), tr("TTFT p99 (s)"), tr("Preemptions"),
                                       tr("Rejected")});
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    layout->addWidget(table_, 1);
    resize(900, 760);
}

SimulateDialog::~SimulateDialog() {
    // A replay stops within a thousand steps of the request; wait for it, so
    // no recording is still being written into recordings_ as it is removed.
    workers_.stop();
    workers_.wait();
}

void SimulateDialog::set_trace(const QString& path) {
    trace_->setText(path);
}
void SimulateDialog::set_capacities(const QString& text) {
    capacities_->setText(text);
}
void SimulateDialog::set_sweep(bool sweep) {
    sweep_->setChecked(sweep);
}
void SimulateDialog::set_policies(bool lru, bool lfu) {
    lru_->setChecked(lru);
    lfu_->setChecked(lfu);
}
void SimulateDialog::set_nodes(int nodes, bool cache_aware) {
    nodes_->setValue(nodes);
    router_->setCurrentIndex(cache_aware ? 1 : 0);
}
void SimulateDialog::set_max_requests(int requests) {
    max_requests_->setValue(requests);
}

QString SimulateDialog::problem() const {
    return status_->property("problem").toString();
}

void SimulateDialog::browse() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Choose a trace"), trace_->text(),
                                                      tr("Traces (*.jsonl *.json);;All files (*)"));
    if (!path.isEmpty()) {
        trace_->setText(path);
    }
}

bool SimulateDialog::read_form(std::vector<sim::SimulationConfig>& configs, QString& why) const {
    if (trace_->text().trimmed().isEmpty()) {
        why = tr("Choose a trace.");
        return false;
    }
    std::vector<std::int64_t> capacities;
    for (const QString& part : capacities_->text().split(',', Qt::SkipEmptyParts)) {
        bool ok = false;
        const long long blocks = part.trimmed().toLongLong(&ok);
        if (!ok || blocks < 1 || blocks > (1 << 24)) {
            why = tr("'%1' is not a capacity of 1 to %2 blocks.").arg(part.trimmed()).arg(1 << 24);
            return false;
        }
        capacities.push_back(blocks);
    }
    if (capacities.empty()) {
        why = tr("Give a capacity in blocks.");
        return false;
    }
    std::vector<kv::CachePolicy> policies;
    if (lru_->isChecked()) {
        policies.push_back(kv::CachePolicy::lru);
    }
    if (lfu_->isChecked()) {
        policies.push_back(kv::CachePolicy::lfu);
    }
    if (policies.empty()) {
        why = tr("Choose a cache policy.");
        return false;
    }
    sim::SimulationConfig base = sim::deployment_config(block_size_->value());
    base.nodes = nodes_->value();
    base.router = static_cast<sim::RouterKind>(router_->currentData().toInt());
    base.max_requests = max_requests_->value();
    configs = sim::sweep_configs(base, capacities, policies, sweep_->isChecked());
    return true;
}

sim::TraceOpener SimulateDialog::opener() const {
    const std::string path = trace_->text().trimmed().toStdString();
    const auto format = static_cast<sim::TraceFormat>(format_->currentData().toInt());
    // Text prompts (kvscope traces) through the model setup.sh fetched (or
    // $KVSCOPE_MODEL's), as kvscope simulate reads them.
    const sim::TokenizerSource tokenizer = sim::model_tokenizer({});
    return [path, format, tokenizer] {
        return sim::open_trace(path, format, tokenizer);
    };
}

void SimulateDialog::set_busy(bool busy) {
    running_ = busy;
    run_->setEnabled(!busy);
    cancel_->setEnabled(busy);
    show_->setEnabled(!busy && !results_.empty());
}

bool SimulateDialog::start() {
    if (running_) {
        return false;
    }
    std::vector<sim::SimulationConfig> configs;
    QString why;
    if (!read_form(configs, why)) {
        status_->setText(why);
        status_->setProperty("problem", why);
        return false;
    }
    status_->setProperty("problem", QString());
    configs_ = configs;
    results_.clear();
    table_->setRowCount(0);
    progress_->setRange(0, static_cast<int>(configs.size()));
    progress_->setValue(0);
    status_->setText(tr("Replaying %1 configurations…").arg(configs.size()));
    set_busy(true);
    QPointer<SimulateDialog> self(this);
    const sim::TraceOpener open = opener();
    workers_.start([self, open, configs](const std::stop_token& stop) {
        std::vector<sim::SimulationResult> results;
        QString error;
        // The simulator reads a flag: raised when the work is asked to stop.
        const auto cancel = std::make_shared<std::atomic<bool>>(false);
        const std::stop_callback raise(stop, [cancel] { *cancel = true; });
        try {
            results = sim::simulate_each(
                open, configs,
                [self](std::size_t done) {
                    run_on_thread_of(qApp, [self, done] {
                        if (self) {
                            self->progress_->setValue(static_cast<int>(done));
                        }
                    });
                },
                0, cancel.get());
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        run_on_thread_of(qApp, [self, cancel, results, error] {
            if (!self) {
                return;
            }
            self->set_busy(false);
            if (!error.isEmpty()) {
                self->status_->setText(error);
                self->status_->setProperty("problem", error);
                emit self->failed(error);
                return;
            }
            self->results_ = results;
            self->show_results();
            self->status_->setText(
                cancel->load()
                    ? tr("Cancelled: each row holds what its replay reached.")
                    : tr("%1 requests; hit ratios at each request's first admission, latency "
                         "under the cost model. Select a row and Show in views to see it.")
                          .arg(results.empty() ? 0 : results.front().requests));
            self->set_busy(false);
            emit self->finished_replays();
        });
    });
    return true;
}

void SimulateDialog::cancel() {
    workers_.stop();
}

void SimulateDialog::show_results() {
    table_->setRowCount(static_cast<int>(results_.size()));
    QChart* chart = chart_->chart();
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
    auto* x = new QLogValueAxis;
    x->setBase(2);
    x->setLabelFormat("%g");
    x->setTitleText(tr("KV capacity (tokens per node)"));
    auto* y = new QValueAxis;
    y->setRange(0, 100);
    y->setTitleText(tr("hit ratio (%)"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    QLineSeries* line = nullptr;
    kv::CachePolicy series_policy{};
    for (std::size_t i = 0; i < results_.size(); ++i) {
        const sim::SimulationConfig& c = configs_[i];
        const sim::SimulationResult& r = results_[i];
        const auto row = static_cast<int>(i);
        const auto set = [&](int column, const QString& text) {
            auto* item = new QTableWidgetItem(text);
            item->setTextAlignment(column == column_policy ? Qt::AlignLeft | Qt::AlignVCenter
                                                           : Qt::AlignRight | Qt::AlignVCenter);
            table_->setItem(row, column, item);
        };
        const qint64 capacity_tokens = static_cast<qint64>(c.num_blocks) * c.block_size;
        set(column_policy,
            QString::fromUtf8(kv::cache_policy_name(c.cache_policy).data()).toUpper());
        set(column_blocks, QString::number(c.num_blocks));
        set(column_tokens, QString::number(capacity_tokens));
        set(column_by_blocks, percent(r.hit_ratio_blocks()));
        set(column_by_tokens, percent(r.hit_ratio_tokens()));
        set(column_per_request, percent(r.hit_ratio_request_mean()));
        set(column_ttft_p50, QString::number(r.ttft_s.p50, 'f', 3));
        set(column_ttft_p99, QString::number(r.ttft_s.p99, 'f', 3));
        set(column_preempted, QString::number(r.preemptions));
        set(column_rejected, QString::number(r.rejected));
        if (line == nullptr || c.cache_policy != series_policy) {
            line = new QLineSeries;
            line->setName(
                QString::fromUtf8(kv::cache_policy_name(c.cache_policy).data()).toUpper());
            chart->addSeries(line);
            line->attachAxis(x);
            line->attachAxis(y);
            series_policy = c.cache_policy;
        }
        if (r.finished > 0) { // every request rejected: no ratio to draw
            line->append(static_cast<double>(capacity_tokens), 100 * r.hit_ratio_tokens());
        }
    }
    if (!results_.empty()) {
        table_->selectRow(0);
    }
}

bool SimulateDialog::show_in_views(int row) {
    if (running_ || row < 0 || row >= static_cast<int>(configs_.size())) {
        return false;
    }
    sim::SimulationConfig config = configs_[static_cast<std::size_t>(row)];
    if (config.nodes != 1) {
        const QString why = tr("A recording holds one engine: replay with one node to see it in "
                               "the views.");
        status_->setText(why);
        status_->setProperty("problem", why);
        return false;
    }
    config.max_requests = config.max_requests > 0
                              ? std::min<std::int64_t>(config.max_requests, kRecordedRequests)
                              : kRecordedRequests;
    const QString path = recordings_.filePath(
        QString("simulated-%1-%2.sqlite").arg(row).arg(QDateTime::currentMSecsSinceEpoch()));
    status_->setText(
        tr("Recording the first %1 requests of row %2…").arg(config.max_requests).arg(row + 1));
    progress_->setRange(0, 0); // busy
    set_busy(true);
    QPointer<SimulateDialog> self(this);
    const sim::TraceOpener open = opener();
    const std::string trace_path = trace_->text().trimmed().toStdString();
    workers_.start([self, open, config, path, trace_path](const std::stop_token& stop) {
        QString error;
        const auto cancel = std::make_shared<std::atomic<bool>>(false);
        const std::stop_callback raise(stop, [cancel] { *cancel = true; });
        try {
            const std::unique_ptr<sim::TraceReader> trace = open();
            profiler::Recorder recorder(
                path.toStdString(),
                profiler::simulate_metadata(trace_path, sim::config_json(config), "kvscope app"));
            sim::simulate(*trace, config, &recorder,
                          [cancel](std::int64_t) { return !cancel->load(); });
            recorder.set_metadata("complete", cancel->load() ? "no" : "yes");
            recorder.close();
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        run_on_thread_of(qApp, [self, cancel, path, error] {
            if (!self) {
                return;
            }
            self->progress_->setRange(0, 1);
            self->progress_->setValue(1);
            self->set_busy(false);
            if (!error.isEmpty() || cancel->load()) {
                const QString why = error.isEmpty() ? tr("Recording cancelled.") : error;
                self->status_->setText(why);
                if (!error.isEmpty()) {
                    self->status_->setProperty("problem", why);
                    emit self->failed(why);
                }
                return;
            }
            self->status_->setText(tr("Recorded to %1; opening it in the views.").arg(path));
            emit self->record_ready(path);
        });
    });
    return true;
}

} // namespace kvscope::ui
