#include "app/ui/panels/quality_panel.h"

#include "app/ui/workers/thread_handoff.h"
#include "engine/model/llama_model.h"
#include "engine/model_path.h"
#include "engine/quality/kv_quality.h"
#include "engine/session/model_loading.h"
#include "engine/workload/eval_texts.h"

#include <QApplication>
#include <QLabel>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

namespace kvscope::ui {
namespace {

QString describe(const quality::QualityResult& r, const RunSettings& s, const QString& text) {
    QString line;
    const double kib = r.bytes_per_token / 1024.0;
    const double f16_kib = r.reference_bytes_per_token / 1024.0;
    line += QObject::tr("<b>%1</b>: %2 KiB per token against %3 KiB at f16 (%4% less)")
                .arg(QString::fromStdString(s.cache_format.describe()))
                .arg(kib, 0, 'f', 1)
                .arg(f16_kib, 0, 'f', 1)
                .arg(100.0 * (1.0 - r.bytes_per_token / r.reference_bytes_per_token), 0, 'f', 0);
    if (s.eviction.enabled()) {
        line += QObject::tr("; <b>%1</b> kept %2 of %3 tokens on average (%4% less memory)")
                    .arg(QString::fromStdString(s.eviction.describe()))
                    .arg(r.mean_cache_tokens, 0, 'f', 0)
                    .arg(r.mean_reference_tokens, 0, 'f', 0)
                    .arg(100.0 * (1.0 - r.mean_cache_tokens / r.mean_reference_tokens), 0, 'f', 0);
    }
    line += QObject::tr(".<br>Quality against an f32 cache: KL %1 nats (p99 %2), top-1 "
                        "agreement %3%, perplexity %4 → %5, over %6 tokens of %7.")
                .arg(r.kl_mean, 0, 'g', 3)
                .arg(r.kl_p99, 0, 'g', 3)
                .arg(100.0 * r.top1_agreement, 0, 'f', 1)
                .arg(r.ppl_reference, 0, 'f', 2)
                .arg(r.ppl, 0, 'f', 2)
                .arg(r.tokens)
                .arg(text);
    return line;
}

} // namespace

QualityPanel::QualityPanel(QWidget* parent)
    : QWidget(parent) {
    setObjectName("qualityPanel");
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    result_ = new QLabel(tr("What this run's KV formats and eviction cost in quality: Measure "
                            "scores an evaluation text against a full f32 cache."));
    result_->setObjectName("qualityResult");
    result_->setWordWrap(true);
    result_->setTextFormat(Qt::RichText);
    progress_ = new QProgressBar;
    progress_->setRange(0, 100);
    progress_->setVisible(false);
    button_ = new QPushButton(tr("Measure quality lost"));
    button_->setObjectName("measureQuality");
    button_->setToolTip(tr("KL divergence, top-1 agreement and perplexity against an f32 "
                           "cache on the first %1 tokens of an evaluation text (the measures "
                           "`kvscope eval` reports for whole texts)")
                            .arg(kTokens));
    layout->addWidget(result_);
    layout->addWidget(progress_);
    layout->addWidget(button_);
    connect(button_, &QPushButton::clicked, this, &QualityPanel::measure_requested);
}

QualityPanel::~QualityPanel() {
    cancel();
    workers_.wait(); // they stop after their chunk and find no panel
}

void QualityPanel::cancel() {
    workers_.stop();
    if (measuring_) {
        measuring_ = false;
        progress_->setVisible(false);
        result_->setText(tr("Measurement cancelled."));
    }
}

QString QualityPanel::result_text() const {
    return result_->text();
}

void QualityPanel::measure(const RunSettings& settings) {
    cancel();
    const int generation = ++generation_;
    measuring_ = true;
    progress_->setValue(0);
    progress_->setVisible(true);
    result_->setText(tr("Measuring %1 against an f32 cache…")
                         .arg(QString::fromStdString(settings.cache_format.describe())));

    QPointer<QualityPanel> self(this);
    workers_.start([self, generation, settings](const std::stop_token& stop) {
        QString text;
        QString error;
        try {
            const auto model = session::load_model(session::model_file(settings.model_path));
            if (workload::eval_texts().empty()) {
                throw std::runtime_error("this build has no evaluation texts");
            }
            const workload::EvalText& eval = workload::eval_texts().front();
            std::vector<std::int32_t> tokens = model->tokenizer().encode_sequence(eval.text, false);
            tokens.resize(std::min<std::size_t>(tokens.size(), kTokens));
            quality::QualityOptions options;
            options.format = settings.cache_format;
            options.eviction = settings.eviction;
            options.block_size = settings.block_size;
            // Two threads at most: it runs beside the app, maybe beside a new run.
            options.backend = settings.backend;
            options.backend.threads =
                settings.backend.threads > 0 ? std::min(settings.backend.threads, 2) : 2;
            options.prompt_tokens = 128; // then 32-token chunks: eviction acts as it goes
            options.progress = [self, &stop](double share) {
                run_on_thread_of(qApp, [self, share] {
                    if (self) {
                        self->progress_->setValue(static_cast<int>(share * 100));
                    }
                });
                return !stop.stop_requested();
            };
            const quality::QualityResult result =
                quality::measure_kv_quality(model, tokens, options);
            text =
                describe(result, settings,
                         QString::fromUtf8(eval.name.data(), static_cast<int>(eval.name.size())));
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        run_on_thread_of(qApp, [self, stop, generation, text, error] {
            if (!self || stop.stop_requested() || generation != self->generation_) {
                return;
            }
            self->measuring_ = false;
            self->progress_->setVisible(false);
            if (!error.isEmpty()) {
                self->result_->setText(tr("Could not measure: %1").arg(error.toHtmlEscaped()));
                emit self->failed(error);
                return;
            }
            self->result_->setText(text);
            emit self->measured(text);
        });
    });
}

} // namespace kvscope::ui
