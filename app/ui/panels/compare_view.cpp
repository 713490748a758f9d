#include "app/ui/panels/compare_view.h"

#include "app/ui/models/compare_model.h"
#include "app/ui/workers/thread_handoff.h"
#include "profiler/recording/recording.h"
#include "profiler/recording/recording_set.h"

#include <exception>

#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

namespace kvscope::ui {

namespace {

// Reads both recordings and compares them (on a worker thread): the result,
// or why not in `error`.
std::shared_ptr<const CompareResult> compare_files(const QString& base, const QString& now,
                                                   const profiler::CompareOptions& options,
                                                   QString& error) {
    auto result = std::make_shared<CompareResult>();
    result->options = options;
    QString which = CompareView::tr("base");
    try {
        result->base = profiler::compute_run_set_stats(base.toStdString());
        which = CompareView::tr("new");
        result->now = profiler::compute_run_set_stats(now.toStdString());
        result->rows = profiler::compare_runs(result->base, result->now, options);
    } catch (const std::exception& e) {
        error = CompareView::tr("Cannot read the %1 recording: %2")
                    .arg(which, QString::fromUtf8(e.what()));
        return nullptr;
    }
    return result;
}

} // namespace

CompareView::CompareView(QWidget* parent)
    : QWidget(parent) {
    const profiler::CompareOptions defaults;
    const auto file_row = [this](QLineEdit*& edit, const QString& name, const QString& title) {
        edit = new QLineEdit(this);
        edit->setObjectName(name);
        edit->setPlaceholderText(tr("a .sqlite recording, or a folder of repetitions"));
        auto* browse_button = new QPushButton(tr("Recording…"), this);
        browse_button->setObjectName(name + "Browse");
        browse_button->setToolTip(tr("Pick one recording"));
        connect(browse_button, &QPushButton::clicked, this,
                [this, edit, title] { browse(edit, title); });
        // Repetitions (kvscope gate's OUT/base and OUT/new) are a folder.
        auto* folder_button = new QPushButton(tr("Folder…"), this);
        folder_button->setObjectName(name + "Folder");
        folder_button->setToolTip(
            tr("Pick a folder of repetitions: each recording in it is one run"));
        connect(folder_button, &QPushButton::clicked, this,
                [this, edit, title] { browse_folder(edit, title); });
        auto* row = new QHBoxLayout;
        row->addWidget(edit, 1);
        row->addWidget(browse_button);
        row->addWidget(folder_button);
        return row;
    };
    auto* form = new QFormLayout;
    form->addRow(tr("Base:"), file_row(base_edit_, "baseFile", tr("Base recording")));
    form->addRow(tr("New:"), file_row(new_edit_, "newFile", tr("New recording")));

    threshold_spin_ = new QDoubleSpinBox(this);
    threshold_spin_->setObjectName("threshold");
    threshold_spin_->setRange(0, 1000);
    threshold_spin_->setDecimals(1);
    threshold_spin_->setSuffix(tr(" %"));
    threshold_spin_->setToolTip(
        tr("Smallest change of a wall-clock timing that counts (CPU time and instructions: 2%)"));
    alpha_spin_ = new QDoubleSpinBox(this);
    alpha_spin_->setObjectName("alpha");
    alpha_spin_->setRange(0.0001, 0.5);
    alpha_spin_->setDecimals(4);
    alpha_spin_->setSingleStep(0.005);
    alpha_spin_->setToolTip(
        tr("One-sided significance level (signed-rank over rounds, Mann-Whitney otherwise)"));
    set_options(defaults);
    compare_button_ = new QPushButton(tr("Compare"), this);
    compare_button_->setObjectName("compareButton");
    connect(compare_button_, &QPushButton::clicked, this, &CompareView::start);
    auto* settings = new QHBoxLayout;
    settings->addWidget(new QLabel(tr("Threshold:"), this));
    settings->addWidget(threshold_spin_);
    settings->addWidget(new QLabel(tr("Alpha:"), this));
    settings->addWidget(alpha_spin_);
    settings->addStretch(1);
    settings->addWidget(compare_button_);
    form->addRow(settings);

    status_label_ = new QLabel(this);
    status_label_->setObjectName("compareStatus");
    status_label_->setWordWrap(true);
    status_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    model_ = new CompareModel(this);
    table_ = new QTableView(this);
    table_->setObjectName("compareTable");
    table_->setModel(model_);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setStretchLastSection(true);

    criteria_label_ = new QLabel(this);
    criteria_label_->setWordWrap(true);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(status_label_);
    layout->addWidget(table_, 1);
    layout->addWidget(criteria_label_);
}

CompareView::~CompareView() = default; // workers_ waits for comparisons under way

void CompareView::set_files(const QString& base, const QString& now) {
    base_edit_->setText(base);
    new_edit_->setText(now);
}

QString CompareView::base_file() const {
    return base_edit_->text();
}

QString CompareView::new_file() const {
    return new_edit_->text();
}

profiler::CompareOptions CompareView::options() const {
    profiler::CompareOptions options;
    options.threshold = threshold_spin_->value() / 100;
    options.alpha = alpha_spin_->value();
    options.hit_rate_drop = hit_rate_drop_;
    return options;
}

void CompareView::set_options(const profiler::CompareOptions& options) {
    threshold_spin_->setValue(100 * options.threshold);
    alpha_spin_->setValue(options.alpha);
    hit_rate_drop_ = options.hit_rate_drop;
}

QString CompareView::summary_text() const {
    return result_ ? regression_summary(model_->regressions()) : QString();
}

void CompareView::start() {
    const QString base = base_file().trimmed();
    const QString now = new_file().trimmed();
    const int generation = ++generation_;
    if (base.isEmpty() || now.isEmpty()) {
        on_failed(tr("Choose a base and a new recording to compare."));
        return;
    }
    // The result comes back to this view's thread; dropped if the view has
    // gone (it waits for its workers as it goes).
    workers_.start([this, base, now, chosen = options(), generation](const std::stop_token&) {
        QString error;
        std::shared_ptr<const CompareResult> result = compare_files(base, now, chosen, error);
        run_on_thread_of(this, [this, generation, result, error] {
            --running_;
            compare_button_->setEnabled(running_ == 0);
            if (generation != generation_) {
                return; // a later comparison was asked for
            }
            if (result) {
                on_result(result);
            } else {
                on_failed(error);
            }
        });
    });
    ++running_;
    compare_button_->setEnabled(false);
    show_status(
        tr("Comparing %1 with %2…").arg(QFileInfo(now).fileName(), QFileInfo(base).fileName()),
        false);
}

void CompareView::on_result(const std::shared_ptr<const CompareResult>& result) {
    result_ = result;
    error_.clear();
    model_->set_comparison(result->rows);
    criteria_label_->setText(QString::fromStdString(profiler::compare_criteria(
        result->options, std::min(result->base.size(), result->now.size()))));
    show_status(summary_text(), model_->regressions() > 0);
    emit finished();
}

void CompareView::on_failed(const QString& message) {
    result_.reset();
    error_ = message;
    model_->clear();
    criteria_label_->clear();
    show_status(message, true);
    emit finished();
}

void CompareView::show_status(const QString& text, bool error) {
    status_label_->setText(text);
    status_label_->setStyleSheet(error ? QStringLiteral("color: #c62828; font-weight: bold;")
                                       : QString());
}

void CompareView::browse(QLineEdit* field, const QString& title) {
    const QString start_dir = field->text().isEmpty() ? QString() : QFileInfo(field->text()).path();
    const QString path = QFileDialog::getOpenFileName(
        this, title, start_dir, tr("kvscope recordings (*.sqlite);;All files (*)"));
    if (!path.isEmpty()) {
        field->setText(path);
    }
}

void CompareView::browse_folder(QLineEdit* field, const QString& title) {
    const QFileInfo current(field->text());
    const QString start_dir = field->text().isEmpty() ? QString()
                              : current.isDir()       ? current.filePath()
                                                      : current.path();
    const QString path = QFileDialog::getExistingDirectory(this, title, start_dir);
    if (!path.isEmpty()) {
        field->setText(path);
    }
}

} // namespace kvscope::ui
