#include "app/ui/panels/sizing_dialog.h"

#include "engine/session/model_loading.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

namespace kvscope::ui {
namespace {

QString bytes_text(double bytes) {
    return QString::fromStdString(kv::size_text(bytes));
}

QComboBox* format_box() {
    auto* box = new QComboBox;
    for (const kv::KvFormat f : kv::all_kv_formats()) {
        box->addItem(QString::fromUtf8(kv::kv_format_name(f).data()), static_cast<int>(f));
    }
    box->setCurrentIndex(box->findData(static_cast<int>(kv::KvFormat::f16)));
    return box;
}

} // namespace

SizingDialog::SizingDialog(const QString& model_path, QWidget* parent)
    : QDialog(parent)
    , model_path_(model_path) {
    setObjectName("sizingDialog");
    setWindowTitle(tr("Size the KV cache"));
    auto* layout = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    model_ = new QComboBox;
    model_->addItem(tr("The run's model"));
    for (const kv::ModelShape& shape : kv::known_model_shapes()) {
        model_->addItem(QString::fromStdString(shape.name));
    }
    form->addRow(tr("Model:"), model_);
    context_ = new QSpinBox;
    context_->setRange(1, 1 << 30);
    context_->setValue(8192);
    context_->setSuffix(tr(" tokens"));
    form->addRow(tr("A request holds:"), context_);
    batch_ = new QSpinBox;
    batch_->setRange(1, 1 << 20);
    form->addRow(tr("Requests at once:"), batch_);
    key_ = format_box();
    value_ = format_box();
    auto* formats = new QHBoxLayout;
    formats->addWidget(new QLabel(tr("K")));
    formats->addWidget(key_, 1);
    formats->addWidget(new QLabel(tr("V")));
    formats->addWidget(value_, 1);
    form->addRow(tr("Formats:"), formats);
    memory_ = new QDoubleSpinBox;
    memory_->setRange(0, 1 << 20);
    memory_->setDecimals(1);
    memory_->setValue(80);
    memory_->setSuffix(tr(" GiB"));
    memory_->setSpecialValueText(tr("not asked"));
    utilization_ = new QDoubleSpinBox;
    utilization_->setRange(0.01, 1.0);
    utilization_->setSingleStep(0.05);
    utilization_->setValue(0.9);
    auto* memory_row = new QHBoxLayout;
    memory_row->addWidget(memory_, 1);
    memory_row->addWidget(new QLabel(tr("used up to")));
    memory_row->addWidget(utilization_);
    form->addRow(tr("Device memory:"), memory_row);
    layout->addLayout(form);
    summary_ = new QLabel;
    summary_->setWordWrap(true);
    layout->addWidget(summary_);
    table_ = new QTableWidget(0, 6);
    table_->setHorizontalHeaderLabels({tr("Attention"), tr("Per token"), tr("A request"),
                                       tr("The batch"), tr("Tokens that fit"),
                                       tr("Requests that fit")});
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    layout->addWidget(table_, 1);
    layout->addWidget(new QLabel(tr("Bold: the model's own attention. MLA for a model without "
                                    "it uses DeepSeek's proportions (kvscope size does the same "
                                    "from the command line).")));

    connect(model_, &QComboBox::currentIndexChanged, this, &SizingDialog::recompute);
    connect(context_, &QSpinBox::valueChanged, this, &SizingDialog::recompute);
    connect(batch_, &QSpinBox::valueChanged, this, &SizingDialog::recompute);
    connect(key_, &QComboBox::currentIndexChanged, this, &SizingDialog::recompute);
    connect(value_, &QComboBox::currentIndexChanged, this, &SizingDialog::recompute);
    connect(memory_, &QDoubleSpinBox::valueChanged, this, &SizingDialog::recompute);
    connect(utilization_, &QDoubleSpinBox::valueChanged, this, &SizingDialog::recompute);
    resize(820, 420);
    recompute();
}

void SizingDialog::choose_model(const QString& name) {
    const int i = model_->findText(name, Qt::MatchFixedString);
    model_->setCurrentIndex(std::max(0, i));
}
void SizingDialog::set_context(int tokens) {
    context_->setValue(tokens);
}
void SizingDialog::set_batch(int requests) {
    batch_->setValue(requests);
}
void SizingDialog::set_formats(kv::KvFormat key, kv::KvFormat value) {
    key_->setCurrentIndex(key_->findData(static_cast<int>(key)));
    value_->setCurrentIndex(value_->findData(static_cast<int>(value)));
}
void SizingDialog::set_memory_gib(double gib) {
    memory_->setValue(gib);
}

QString SizingDialog::summary() const {
    return summary_->text();
}

void SizingDialog::recompute() {
    table_->setRowCount(0);
    kv::ModelShape shape;
    if (model_->currentIndex() == 0) {
        try {
            shape = session::model_shape(session::model_file(model_path_.toStdString()));
        } catch (const std::exception& e) {
            summary_->setText(tr("The run's model cannot be read: %1").arg(e.what()));
            return;
        }
    } else {
        shape = *kv::find_model_shape(model_->currentText().toStdString());
    }
    const kv::KvCacheFormat format{static_cast<kv::KvFormat>(key_->currentData().toInt()),
                                   static_cast<kv::KvFormat>(value_->currentData().toInt())};
    for (const kv::KvFormat f : {format.key, format.value}) {
        if (const std::string problem = kv::kv_format_problem(f, shape.key_dim); !problem.empty()) {
            summary_->setText(QString::fromStdString(problem));
            return;
        }
    }
    kv::SizingQuestion question;
    question.context_tokens = context_->value();
    question.batch = batch_->value();
    question.memory_bytes = memory_->value() * 1024.0 * 1024 * 1024;
    question.utilization = utilization_->value();
    question.weight_bytes = shape.weight_bytes;
    const kv::SizingAnswer own = kv::answer(shape, format, question);
    QString text = tr("%1: %2 layers, %3 query heads, %4 KV heads; weights %5.")
                       .arg(QString::fromStdString(shape.name))
                       .arg(shape.layers)
                       .arg(shape.heads)
                       .arg(shape.kv_heads)
                       .arg(bytes_text(shape.weight_bytes));
    if (shape.hybrid()) {
        // The table's per-token figure counts a token while it is in every
        // window; say what one keeps once past them.
        text += tr(" %1 of its layers attend over a sliding window of %2 tokens; a token past "
                   "the windows keeps %3 (per token below: inside them).")
                    .arg(shape.sliding_layers)
                    .arg(shape.sliding_window)
                    .arg(bytes_text(kv::bytes_per_token_past_windows(shape, format)));
    }
    if (question.memory_bytes > 0) {
        text += own.cache_budget_bytes > 0
                    ? tr(" The cache gets %1.").arg(bytes_text(own.cache_budget_bytes))
                    : tr(" The weights do not fit in that memory.");
    }
    summary_->setText(text);
    const std::vector<kv::VariantSize> variants = kv::attention_variants(shape, format);
    table_->setRowCount(static_cast<int>(variants.size()));
    for (std::size_t i = 0; i < variants.size(); ++i) {
        const kv::VariantSize& v = variants[i];
        const kv::SizingAnswer a = kv::answer(v.shape, format, question);
        const QStringList cells{
            QString::fromStdString(v.label),
            bytes_text(v.bytes_per_token),
            bytes_text(a.per_request_bytes),
            bytes_text(a.per_batch_bytes),
            question.memory_bytes > 0 ? QString::number(a.tokens_fit, 'f', 0) : QString("-"),
            question.memory_bytes > 0 ? QString::number(a.requests_fit, 'f', 0) : QString("-")};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (v.own) {
                QFont bold = item->font();
                bold.setBold(true);
                item->setFont(bold);
            }
            item->setTextAlignment(c == 0 ? Qt::AlignLeft | Qt::AlignVCenter
                                          : Qt::AlignRight | Qt::AlignVCenter);
            table_->setItem(static_cast<int>(i), c, item);
        }
    }
}

} // namespace kvscope::ui
