#include "app/ui/panels/attach_dialog.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

namespace kvscope::ui {
namespace {

constexpr const char* kRecentKey = "attach/recent";

} // namespace

AttachDialog::AttachDialog(QWidget* parent)
    : QDialog(parent) {
    setObjectName("attachDialog");
    setWindowTitle(tr("Attach to engine"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(new QLabel(
        tr("Publishers of KV-cache events, one per line: the event endpoint and, optionally, "
           "its replay endpoint and the engine's Prometheus metrics URL (KV usage, prefix "
           "cache hit rate, capacity).<br>vLLM: <tt>--kv-events-config "
           "'{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"endpoint\": "
           "\"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5558\"}'</tt> publishes at "
           "<tt>HOST:5557 HOST:5558 http://HOST:8000/metrics</tt>. TensorRT-LLM: a line "
           "<tt>trtllm HOST:8000</tt> polls trtllm-serve's <tt>/kv_cache_events</tt>.")));
    publishers_ = new QPlainTextEdit;
    publishers_->setObjectName("attachPublishers");
    publishers_->setPlaceholderText("localhost:5557 localhost:5558 http://localhost:8000/metrics");
    publishers_->setTabChangesFocus(true);
    layout->addWidget(publishers_);

    layout->addWidget(new QLabel(tr("Recent (double-click to add):")));
    recent_ = new QListWidget;
    recent_->setObjectName("attachRecent");
    recent_->addItems(recent_lines());
    recent_->setMaximumHeight(110);
    connect(recent_, &QListWidget::itemDoubleClicked, this, [this](QListWidgetItem* item) {
        const QString text = publishers_->toPlainText().trimmed();
        publishers_->setPlainText(text.isEmpty() ? item->text() : text + "\n" + item->text());
    });
    layout->addWidget(recent_);

    auto* form = new QFormLayout;
    topic_ = new QLineEdit;
    topic_->setPlaceholderText(tr("every topic"));
    form->addRow(tr("Topic:"), topic_);
    num_blocks_ = new QSpinBox;
    num_blocks_->setObjectName("attachNumBlocks");
    num_blocks_->setRange(0, 100'000'000);
    num_blocks_->setSpecialValueText(tr("not known"));
    num_blocks_->setToolTip(tr("Each engine's GPU KV capacity in blocks (vLLM: num_gpu_blocks), "
                               "to show how full it is"));
    form->addRow(tr("Capacity (blocks):"), num_blocks_);
    block_size_ = new QSpinBox;
    block_size_->setRange(0, 1 << 20);
    block_size_->setSpecialValueText(tr("from the events"));
    form->addRow(tr("Block size (tokens):"), block_size_);
    auto* record_row = new QHBoxLayout;
    record_path_ = new QLineEdit;
    record_path_->setObjectName("attachRecordPath");
    record_path_->setPlaceholderText(tr("no recording"));
    auto* browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Record to"), "attached.sqlite",
                                                          tr("kvscope recordings (*.sqlite)"));
        if (!path.isEmpty()) {
            record_path_->setText(path);
        }
    });
    record_row->addWidget(record_path_, 1);
    record_row->addWidget(browse);
    form->addRow(tr("Record to:"), record_row);
    auto* tokenizer_row = new QHBoxLayout;
    tokenizer_path_ = new QLineEdit;
    tokenizer_path_->setObjectName("attachTokenizer");
    tokenizer_path_->setPlaceholderText(tr("none: token ids as numbers"));
    tokenizer_path_->setToolTip(tr("The engine's model as a GGUF file: its tokenizer shows the "
                                   "token ids in the events as text"));
    auto* pick_tokenizer = new QPushButton(tr("Browse…"));
    connect(pick_tokenizer, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Tokenizer (a GGUF model)"),
                                                          QString(), tr("GGUF (*.gguf)"));
        if (!path.isEmpty()) {
            tokenizer_path_->setText(path);
        }
    });
    tokenizer_row->addWidget(tokenizer_path_, 1);
    tokenizer_row->addWidget(pick_tokenizer);
    form->addRow(tr("Tokenizer:"), tokenizer_row);
    layout->addLayout(form);

    problem_ = new QLabel;
    problem_->setObjectName("attachProblem");
    problem_->setStyleSheet("color: #b00020");
    problem_->hide();
    layout->addWidget(problem_);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Attach"));
    connect(buttons, &QDialogButtonBox::accepted, this, &AttachDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &AttachDialog::reject);
    layout->addWidget(buttons);
    if (!recent_lines().isEmpty()) {
        publishers_->setPlainText(recent_lines().front());
    }
}

void AttachDialog::set_lines(const QStringList& lines) {
    publishers_->setPlainText(lines.join('\n'));
}

QStringList AttachDialog::recent_lines() {
    return QSettings().value(kRecentKey).toStringList();
}

void AttachDialog::remember(const QStringList& lines) {
    QStringList recent = recent_lines();
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        recent.removeAll(*it);
        recent.prepend(*it);
    }
    while (recent.size() > kRecentKept) {
        recent.removeLast();
    }
    QSettings().setValue(kRecentKey, recent);
}

void AttachDialog::accept() {
    AttachSettings settings;
    const QString problem =
        AttachSettings::from_lines(publishers_->toPlainText().split('\n'), settings);
    if (!problem.isEmpty()) {
        problem_->setText(problem);
        problem_->show();
        return;
    }
    settings.topic = topic_->text().trimmed();
    settings.num_blocks = num_blocks_->value();
    settings.block_size = block_size_->value();
    settings.record_path = record_path_->text().trimmed();
    settings.tokenizer_path = tokenizer_path_->text().trimmed();
    settings_ = settings;
    remember(settings.lines());
    QDialog::accept();
}

} // namespace kvscope::ui
