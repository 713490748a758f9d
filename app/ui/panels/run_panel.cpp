#include "app/ui/panels/run_panel.h"

#include "app/ui/panels/quality_panel.h"
#include "app/ui/run/teaching_presets.h"
#include "engine/model_path.h"
#include "engine/session/backend_factory.h"
#include "engine/workload/workload.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QCompleter>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace kvscope::ui {
namespace {

QSpinBox* spin(int low, int high, int value, const QString& tip) {
    auto* box = new QSpinBox;
    box->setRange(low, high);
    box->setValue(value);
    box->setToolTip(tip);
    return box;
}

QComboBox* format_combo() {
    auto* combo = new QComboBox;
    for (const kv::KvFormat format : kv::all_kv_formats()) {
        combo->addItem(QString::fromStdString(std::string(kv::kv_format_name(format))),
                       static_cast<int>(format));
    }
    return combo;
}

void select_data(QComboBox* combo, int value) {
    const int index = combo->findData(value);
    if (index >= 0) {
        combo->setCurrentIndex(index);
    }
}

} // namespace

RunPanel::RunPanel(QWidget* parent)
    : QWidget(parent) {
    setObjectName("runPanel");
    auto* layout = new QVBoxLayout(this);

    preset_ = new QComboBox;
    preset_->setObjectName("presetCombo");
    for (const TeachingPreset& preset : teaching_presets()) {
        preset_->addItem(preset.title, preset.id);
    }
    preset_->addItem(tr("Custom"), QString());
    preset_->setToolTip(tr("Demo presets: each sets up a run that shows one effect live"));
    auto* preset_row = new QFormLayout;
    preset_row->addRow(tr("Demo:"), preset_);
    layout->addLayout(preset_row);
    explanation_ = new QTextBrowser;
    explanation_->setObjectName("explanation");
    explanation_->setOpenExternalLinks(false);
    explanation_->setMinimumHeight(120);
    layout->addWidget(explanation_, 1);
    auto* quality_group = new QGroupBox(tr("Quality lost"));
    auto* quality_layout = new QVBoxLayout(quality_group);
    quality_ = new QualityPanel;
    quality_layout->addWidget(quality_);
    layout->addWidget(quality_group);

    layout->addWidget(build_engine_group());
    layout->addWidget(build_workload_group());

    auto* buttons = new QHBoxLayout;
    start_ = new QPushButton(tr("Start"));
    start_->setObjectName("startButton");
    pause_ = new QPushButton(tr("Pause"));
    pause_->setObjectName("pauseButton");
    pause_->setCheckable(true);
    stop_ = new QPushButton(tr("Stop"));
    stop_->setObjectName("stopButton");
    buttons->addWidget(start_);
    buttons->addWidget(pause_);
    buttons->addWidget(stop_);
    layout->addLayout(buttons);
    progress_ = new QProgressBar;
    progress_->setObjectName("runProgress");
    progress_->setRange(0, 1);
    progress_->setValue(0);
    progress_->setFormat(tr("%v of %m requests"));
    layout->addWidget(progress_);
    status_ = new QLabel(tr("Choose a demo or settings, then Start."));
    status_->setObjectName("runStatus");
    status_->setWordWrap(true);
    layout->addWidget(status_);

    connect(start_, &QPushButton::clicked, this, &RunPanel::start_requested);
    connect(pause_, &QPushButton::toggled, this, &RunPanel::pause_toggled);
    connect(stop_, &QPushButton::clicked, this, &RunPanel::stop_requested);
    connect(preset_, &QComboBox::activated, this,
            [this](int index) { choose_preset(preset_->itemData(index).toString()); });
    set_running(false);
    choose_preset(teaching_presets().front().id);
}

QWidget* RunPanel::build_engine_group() {
    auto* group = new QGroupBox(tr("Engine and KV cache"));
    auto* form = new QFormLayout(group);
    auto* model_row = new QHBoxLayout;
    model_ = new QLineEdit;
    model_->setObjectName("modelPath");
    // A file, or a model setup.sh fetched by name (offered as one types).
    const QString names = QString::fromStdString(model_names());
    model_->setPlaceholderText(
        tr("a GGUF file or %1 (default: $KVSCOPE_MODEL or smollm2)").arg(names));
    model_->setCompleter(new QCompleter(names.split(", "), model_));
    auto* browse = new QPushButton(tr("…"));
    browse->setToolTip(tr("Choose a GGUF model file"));
    connect(browse, &QPushButton::clicked, this, &RunPanel::browse_model);
    model_row->addWidget(model_, 1);
    model_row->addWidget(browse);
    form->addRow(tr("Model:"), model_row);

    backend_ = new QComboBox;
    backend_->addItem(tr("Auto"), static_cast<int>(session::BackendKind::automatic));
    backend_->addItem(tr("CPU"), static_cast<int>(session::BackendKind::cpu));
    backend_->addItem(tr("CUDA"), static_cast<int>(session::BackendKind::cuda));
    backend_->setItemData(0, tr("The GPU when this build can use one, else the CPU"),
                          Qt::ToolTipRole);
    // Offered only where it can run; otherwise listed with the reason.
    if (const std::string reason = session::cuda_unavailable_reason(); reason.empty()) {
        backend_->setItemData(2, tr("The GPU, through the CUDA backend"), Qt::ToolTipRole);
    } else if (auto* items = qobject_cast<QStandardItemModel*>(backend_->model())) {
        items->item(2)->setEnabled(false);
        items->item(2)->setToolTip(
            tr("The CUDA backend cannot run here: %1").arg(QString::fromStdString(reason)));
    }
    threads_ = spin(0, 256, 0, tr("CPU threads (0: all)"));
    threads_->setSpecialValueText(tr("all"));
    auto* backend_row = new QHBoxLayout;
    backend_row->addWidget(backend_, 1);
    backend_row->addWidget(new QLabel(tr("threads")));
    backend_row->addWidget(threads_);
    form->addRow(tr("Backend:"), backend_row);

    block_size_ = spin(1, 1024, 16, tr("Tokens per KV-cache block (vLLM's default: 16)"));
    block_size_->setObjectName("blockSize");
    form->addRow(tr("Block size:"), block_size_);
    cache_size_ = spin(2, 1 << 20, 256, tr("KV-cache capacity"));
    cache_size_->setObjectName("cacheSize");
    // The same choices as the command line's (session::CacheSize).
    cache_unit_ = new QComboBox;
    cache_unit_->addItem(tr("blocks"), static_cast<int>(CacheUnit::blocks));
    cache_unit_->addItem(tr("MiB"), static_cast<int>(CacheUnit::mebibytes));
    cache_unit_->addItem(tr("tokens"), static_cast<int>(CacheUnit::tokens));
    cache_unit_->addItem(tr("% of memory"), static_cast<int>(CacheUnit::percent_of_memory));
    cache_unit_->setItemData(0, tr("--num-gpu-blocks-override"), Qt::ToolTipRole);
    cache_unit_->setItemData(1, tr("--kv-cache-memory-bytes"), Qt::ToolTipRole);
    cache_unit_->setItemData(2, tr("--cache-tokens"), Qt::ToolTipRole);
    cache_unit_->setItemData(
        3,
        tr("--gpu-memory-utilization: of free device memory on a GPU, of the memory available "
           "now on the CPU"),
        Qt::ToolTipRole);
    auto* cache_row = new QHBoxLayout;
    cache_row->addWidget(cache_size_, 1);
    cache_row->addWidget(cache_unit_);
    form->addRow(tr("Cache size:"), cache_row);

    key_format_ = format_combo();
    key_format_->setObjectName("keyFormat");
    value_format_ = format_combo();
    value_format_->setObjectName("valueFormat");
    auto* format_row = new QHBoxLayout;
    format_row->addWidget(new QLabel(tr("K")));
    format_row->addWidget(key_format_, 1);
    format_row->addWidget(new QLabel(tr("V")));
    format_row->addWidget(value_format_, 1);
    form->addRow(tr("Formats:"), format_row);

    hybrid_kv_ = new QCheckBox(tr("Own block tables (hybrid cache)"));
    hybrid_kv_->setObjectName("hybridKv");
    hybrid_tooltip_ =
        tr("For models with sliding-window layers (Gemma 3): those layers get their own block "
           "tables, which let go of the blocks that leave the window, as vLLM's hybrid KV-cache "
           "manager does. Unticked, all layers share one table and keep every block "
           "(--disable-hybrid-kv-cache-manager); the window is masked either way. No effect on "
           "models whose layers all attend over the whole context.");
    hybrid_kv_->setToolTip(hybrid_tooltip_);
    form->addRow(tr("Window layers:"), hybrid_kv_);

    eviction_ = new QComboBox;
    eviction_->setObjectName("eviction");
    for (const kv::EvictionKind kind :
         {kv::EvictionKind::none, kv::EvictionKind::window, kv::EvictionKind::streaming,
          kv::EvictionKind::h2o, kv::EvictionKind::snapkv}) {
        eviction_->addItem(QString::fromStdString(std::string(kv::eviction_kind_name(kind))),
                           static_cast<int>(kind));
    }
    kv_budget_ = spin(1, 1 << 20, 256, tr("Most tokens a sequence keeps in the cache"));
    kv_budget_->setSuffix(tr(" tokens"));
    auto* eviction_row = new QHBoxLayout;
    eviction_row->addWidget(eviction_, 1);
    eviction_row->addWidget(kv_budget_);
    form->addRow(tr("Eviction:"), eviction_row);
    connect(eviction_, &QComboBox::currentIndexChanged, this, &RunPanel::update_eviction_enabled);

    prefix_caching_ = new QCheckBox(tr("Prefix caching"));
    prefix_caching_->setObjectName("prefixCaching");
    cache_policy_ = new QComboBox;
    cache_policy_->setObjectName("cachePolicy");
    cache_policy_->setToolTip(tr("Which cached prefix block is reclaimed first when blocks run "
                                 "out (--cache-policy)"));
    cache_policy_->addItem(tr("LRU: least recently used"), static_cast<int>(kv::CachePolicy::lru));
    cache_policy_->addItem(tr("LFU: least frequently used"),
                           static_cast<int>(kv::CachePolicy::lfu));
    connect(prefix_caching_, &QCheckBox::toggled, cache_policy_, &QWidget::setEnabled);
    auto* prefix_row = new QHBoxLayout;
    prefix_row->addWidget(prefix_caching_);
    prefix_row->addWidget(cache_policy_, 1);
    form->addRow(QString(), prefix_row);
    speculative_ = new QComboBox;
    speculative_->setObjectName("speculative");
    speculative_->setToolTip(tr("Speculative decoding (--speculative): draft tokens cheaply, "
                                "verify them in one pass, roll back the rejected ones' KV"));
    speculative_->addItem(tr("No speculation"), static_cast<int>(spec::DraftMethod::none));
    speculative_->addItem(tr("Prompt lookup (ngram)"), static_cast<int>(spec::DraftMethod::ngram));
    speculative_->addItem(tr("Self-draft (first layers)"),
                          static_cast<int>(spec::DraftMethod::layers));
    draft_tokens_ = spin(1, 32, 4, tr("Tokens drafted a step, verified in one pass"));
    draft_tokens_->setObjectName("draftTokens");
    draft_tokens_->setPrefix(tr("K "));
    draft_layers_ = spin(1, 1024, 24, tr("Layers of the self-draft (--draft-layers)"));
    draft_layers_->setObjectName("draftLayers");
    draft_layers_->setSuffix(tr(" layers"));
    auto* speculative_row = new QHBoxLayout;
    speculative_row->addWidget(speculative_, 1);
    speculative_row->addWidget(draft_tokens_);
    speculative_row->addWidget(draft_layers_);
    form->addRow(tr("Speculative:"), speculative_row);
    connect(speculative_, &QComboBox::currentIndexChanged, this,
            &RunPanel::update_speculative_enabled);
    update_speculative_enabled();
    offload_tier_ = new QComboBox;
    offload_tier_->setObjectName("offloadTier");
    offload_tier_->setToolTip(tr("A second tier for blocks the pool reclaims (--offload-tier): "
                                 "a later prefix hit loads them back instead of computing them"));
    offload_tier_->addItem(tr("No offload tier"), -1);
    offload_tier_->addItem(tr("Host memory"), static_cast<int>(kv::TierMedium::memory));
    offload_tier_->addItem(tr("File on disk"), static_cast<int>(kv::TierMedium::file));
    offload_blocks_ = spin(1, 1 << 24, 256, tr("Blocks the offload tier holds (--offload-blocks)"));
    offload_blocks_->setObjectName("offloadBlocks");
    offload_blocks_->setSuffix(tr(" blocks"));
    write_through_ = new QCheckBox(tr("Write-through"));
    write_through_->setObjectName("writeThrough");
    write_through_->setToolTip(tr("Save blocks to the tier as soon as they are cached, not when "
                                  "the pool reclaims them (--offload-write-through)"));
    auto* offload_row = new QHBoxLayout;
    offload_row->addWidget(offload_tier_, 1);
    offload_row->addWidget(offload_blocks_);
    offload_row->addWidget(write_through_);
    form->addRow(tr("Offload:"), offload_row);
    connect(offload_tier_, &QComboBox::currentIndexChanged, this,
            &RunPanel::update_offload_enabled);
    connect(prefix_caching_, &QCheckBox::toggled, this, &RunPanel::update_offload_enabled);
    update_offload_enabled();
    max_seqs_ = spin(1, 1024, 16, tr("Most sequences in one step (--max-num-seqs)"));
    max_batched_tokens_ =
        spin(1, 1 << 16, 512, tr("Most tokens in one step (--max-num-batched-tokens)"));
    auto* scheduler_row = new QHBoxLayout;
    scheduler_row->addWidget(max_seqs_);
    scheduler_row->addWidget(new QLabel(tr("seqs")));
    scheduler_row->addWidget(max_batched_tokens_);
    scheduler_row->addWidget(new QLabel(tr("tokens")));
    form->addRow(tr("Step budget:"), scheduler_row);
    return group;
}

QWidget* RunPanel::build_workload_group() {
    auto* group = new QGroupBox(tr("Workload"));
    auto* form = new QFormLayout(group);
    workload_ = new QComboBox;
    workload_->setObjectName("workload");
    workload_->setEditable(true); // a .jsonl trace path works too
    for (const std::string& name : workload::workload_preset_names()) {
        workload_->addItem(QString::fromStdString(name));
    }
    workload_->setToolTip(QString::fromStdString(workload::workload_preset_help()) +
                          tr("\nor the path of a JSONL trace"));
    form->addRow(tr("Preset:"), workload_);
    requests_ = spin(1, 100000, 24, tr("Requests in the workload"));
    requests_->setObjectName("requests");
    rate_ = new QDoubleSpinBox;
    rate_->setRange(0.01, 1000);
    rate_->setDecimals(2);
    rate_->setSuffix(tr(" /s"));
    rate_->setToolTip(tr("Arrivals per second"));
    auto* count_row = new QHBoxLayout;
    count_row->addWidget(requests_, 1);
    count_row->addWidget(new QLabel(tr("at")));
    count_row->addWidget(rate_, 1);
    form->addRow(tr("Requests:"), count_row);
    max_tokens_ = spin(1, 8192, 48, tr("Most tokens each request generates"));
    max_tokens_->setObjectName("maxTokens");
    seed_ = spin(0, 1 << 30, 1, tr("Workload and sampling seed: the same seed, the same run"));
    auto* tokens_row = new QHBoxLayout;
    tokens_row->addWidget(max_tokens_, 1);
    tokens_row->addWidget(new QLabel(tr("seed")));
    tokens_row->addWidget(seed_, 1);
    form->addRow(tr("Max tokens:"), tokens_row);

    record_ = new QCheckBox(tr("Record to"));
    record_->setObjectName("recordCheck");
    record_path_ = new QLineEdit(QDir::home().filePath("kvscope-run.sqlite"));
    record_path_->setObjectName("recordPath");
    auto* browse = new QPushButton(tr("…"));
    connect(browse, &QPushButton::clicked, this, &RunPanel::browse_recording);
    auto* record_row = new QHBoxLayout;
    record_row->addWidget(record_);
    record_row->addWidget(record_path_, 1);
    record_row->addWidget(browse);
    form->addRow(record_row);
    return group;
}

void RunPanel::browse_model() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Model"), model_->text(),
                                                      tr("GGUF models (*.gguf);;All files (*)"));
    if (!path.isEmpty()) {
        model_->setText(path);
    }
}

void RunPanel::browse_recording() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Record to"), record_path_->text(),
                                                      tr("kvscope recordings (*.sqlite)"));
    if (!path.isEmpty()) {
        record_path_->setText(path);
        record_->setChecked(true);
    }
}

void RunPanel::update_eviction_enabled() {
    kv_budget_->setEnabled(eviction_->currentData().toInt() !=
                           static_cast<int>(kv::EvictionKind::none));
    update_hybrid_enabled();
}

void RunPanel::update_hybrid_enabled() {
    // Token eviction and the offload tier each move one table's blocks: the
    // engine refuses them with a hybrid cache, so the run takes one plain
    // table instead, and the box says why it is off.
    const bool eviction =
        eviction_->currentData().toInt() != static_cast<int>(kv::EvictionKind::none);
    const bool tier = prefix_caching_->isChecked() && offload_tier_->currentData().toInt() >= 0;
    hybrid_kv_->setEnabled(!eviction && !tier);
    hybrid_kv_->setToolTip(
        hybrid_kv_->isEnabled()
            ? hybrid_tooltip_
            : tr("Off while %1 is chosen: it needs every layer in one block table.")
                  .arg(eviction ? tr("token eviction") : tr("an offload tier")));
}

void RunPanel::update_speculative_enabled() {
    const auto method = static_cast<spec::DraftMethod>(speculative_->currentData().toInt());
    draft_tokens_->setEnabled(method != spec::DraftMethod::none);
    draft_layers_->setEnabled(method == spec::DraftMethod::layers);
}

void RunPanel::update_offload_enabled() {
    // The tier keeps prefix-cached blocks: without prefix caching it has none.
    const bool caching = prefix_caching_->isChecked();
    const bool tier = caching && offload_tier_->currentData().toInt() >= 0;
    offload_tier_->setEnabled(caching);
    offload_blocks_->setEnabled(tier);
    write_through_->setEnabled(tier);
    update_hybrid_enabled();
}

RunSettings RunPanel::settings() const {
    RunSettings s;
    s.model_path = model_->text().trimmed().toStdString();
    s.backend.kind = static_cast<session::BackendKind>(backend_->currentData().toInt());
    s.backend.threads = threads_->value();
    s.block_size = block_size_->value();
    s.cache = {};
    const int size = cache_size_->value();
    switch (static_cast<CacheUnit>(cache_unit_->currentData().toInt())) {
    case CacheUnit::blocks:
        s.cache.num_blocks = size;
        break;
    case CacheUnit::mebibytes:
        s.cache.memory_bytes = std::int64_t{size} * 1024 * 1024;
        break;
    case CacheUnit::tokens:
        s.cache.tokens = size;
        break;
    case CacheUnit::percent_of_memory:
        s.cache.memory_utilization = std::min(size, 100) / 100.0;
        break;
    }
    s.cache_format.key = static_cast<kv::KvFormat>(key_format_->currentData().toInt());
    s.cache_format.value = static_cast<kv::KvFormat>(value_format_->currentData().toInt());
    s.eviction.kind = static_cast<kv::EvictionKind>(eviction_->currentData().toInt());
    s.eviction.budget = s.eviction.enabled() ? kv_budget_->value() : 0;
    s.hybrid_kv = hybrid_kv_->isChecked() && hybrid_kv_->isEnabled();
    s.prefix_caching = prefix_caching_->isChecked();
    s.cache_policy = static_cast<kv::CachePolicy>(cache_policy_->currentData().toInt());
    s.speculative.method = static_cast<spec::DraftMethod>(speculative_->currentData().toInt());
    s.speculative.draft_tokens = draft_tokens_->value();
    s.speculative.draft_layers =
        s.speculative.method == spec::DraftMethod::layers ? draft_layers_->value() : 0;
    const int medium = offload_tier_->currentData().toInt();
    s.offload = {};
    s.offload_write_through = false;
    if (medium >= 0 && s.prefix_caching) {
        s.offload.medium = static_cast<kv::TierMedium>(medium);
        s.offload.capacity_blocks = offload_blocks_->value();
        s.offload_write_through = write_through_->isChecked();
    }
    s.scheduler.max_num_seqs = max_seqs_->value();
    s.scheduler.max_num_batched_tokens = max_batched_tokens_->value();
    s.workload = workload_->currentText().trimmed().toStdString();
    s.preset.requests = requests_->value();
    s.preset.rate = rate_->value();
    s.preset.max_tokens = max_tokens_->value();
    s.preset.seed = static_cast<std::uint64_t>(seed_->value());
    if (record_->isChecked()) {
        s.record_path = record_path_->text().trimmed().toStdString();
    }
    return s;
}

void RunPanel::apply_settings(const RunSettings& s) {
    model_->setText(QString::fromStdString(s.model_path));
    select_data(backend_, static_cast<int>(s.backend.kind));
    threads_->setValue(s.backend.threads);
    block_size_->setValue(s.block_size);
    CacheUnit unit = CacheUnit::blocks;
    int size = s.cache.num_blocks;
    if (s.cache.memory_bytes > 0) {
        unit = CacheUnit::mebibytes;
        size = static_cast<int>(s.cache.memory_bytes / (1024 * 1024));
    } else if (s.cache.tokens > 0) {
        unit = CacheUnit::tokens;
        size = static_cast<int>(s.cache.tokens);
    } else if (s.cache.memory_utilization > 0) {
        unit = CacheUnit::percent_of_memory;
        size = static_cast<int>(s.cache.memory_utilization * 100 + 0.5);
    }
    select_data(cache_unit_, static_cast<int>(unit));
    cache_size_->setValue(size);
    select_data(key_format_, static_cast<int>(s.cache_format.key));
    select_data(value_format_, static_cast<int>(s.cache_format.value));
    select_data(eviction_, static_cast<int>(s.eviction.kind));
    if (s.eviction.enabled()) {
        kv_budget_->setValue(s.eviction.budget);
    }
    update_eviction_enabled();
    hybrid_kv_->setChecked(s.hybrid_kv);
    prefix_caching_->setChecked(s.prefix_caching);
    cache_policy_->setEnabled(s.prefix_caching);
    select_data(cache_policy_, static_cast<int>(s.cache_policy));
    select_data(speculative_, static_cast<int>(s.speculative.enabled() ? s.speculative.method
                                                                       : spec::DraftMethod::none));
    draft_tokens_->setValue(s.speculative.draft_tokens);
    if (s.speculative.method == spec::DraftMethod::layers) {
        draft_layers_->setValue(s.speculative.draft_layers);
    }
    update_speculative_enabled();
    select_data(offload_tier_,
                s.offload.capacity_blocks > 0 ? static_cast<int>(s.offload.medium) : -1);
    if (s.offload.capacity_blocks > 0) {
        offload_blocks_->setValue(static_cast<int>(
            std::min<std::int64_t>(s.offload.capacity_blocks, offload_blocks_->maximum())));
    }
    write_through_->setChecked(s.offload_write_through);
    update_offload_enabled();
    max_seqs_->setValue(s.scheduler.max_num_seqs);
    max_batched_tokens_->setValue(s.scheduler.max_num_batched_tokens);
    workload_->setCurrentText(QString::fromStdString(s.workload));
    requests_->setValue(s.preset.requests);
    rate_->setValue(s.preset.rate);
    max_tokens_->setValue(s.preset.max_tokens);
    seed_->setValue(static_cast<int>(s.preset.seed));
    record_->setChecked(!s.record_path.empty());
    if (!s.record_path.empty()) {
        record_path_->setText(QString::fromStdString(s.record_path));
    }
}

void RunPanel::choose_preset(const QString& id) {
    const TeachingPreset* preset = find_teaching_preset(id);
    const int index = preset_->findData(id);
    preset_->setCurrentIndex(index >= 0 ? index : preset_->count() - 1);
    if (preset != nullptr) {
        const bool recording = record_->isChecked();
        const QString path = record_path_->text();
        apply_settings(preset->settings);
        record_->setChecked(recording); // a preset does not decide where runs are saved
        record_path_->setText(path);
    }
    explain_preset();
}

void RunPanel::explain_preset() {
    const TeachingPreset* preset = find_teaching_preset(preset_->currentData().toString());
    if (preset == nullptr) {
        explanation_->setHtml(tr("<p>Your own settings. Each control's tooltip says what it "
                                 "does; the demos above set them up to show one effect each.</p>"));
        return;
    }
    explanation_->setHtml(QString("<h3>%1</h3>%2").arg(preset->title, preset->explanation));
}

void RunPanel::explain_other(const QString& title, const QString& html) {
    explanation_->setHtml(QString("<h3>%1</h3>%2").arg(title.toHtmlEscaped(), html));
}

QString RunPanel::explanation_text() const {
    return explanation_->toPlainText();
}

void RunPanel::set_running(bool running, bool pausable) {
    start_->setEnabled(!running);
    pause_->setEnabled(running && pausable);
    stop_->setEnabled(running);
    if (!running) {
        pause_->setChecked(false);
    }
}

void RunPanel::set_paused(bool paused) {
    pause_->setChecked(paused);
}

void RunPanel::set_loading(bool loading) {
    if (loading) {
        progress_->setRange(0, 0); // busy: the loader reports no finer progress
        progress_->setFormat(tr("Loading the model…"));
    } else {
        progress_->setRange(0, 1);
        progress_->setValue(0);
        progress_->setFormat(tr("%v of %m requests"));
    }
}

void RunPanel::set_progress(int done, int total) {
    progress_->setRange(0, std::max(1, total));
    progress_->setValue(done);
}

void RunPanel::advance_record_path() {
    const QFileInfo current(record_path_->text().trimmed());
    if (!current.exists()) {
        return;
    }
    QString stem = current.completeBaseName();
    // "run-2" goes on to "run-3", not "run-2-2".
    static const QRegularExpression numbered("^(.*)-(\\d+)$");
    int number = 2;
    if (const QRegularExpressionMatch match = numbered.match(stem); match.hasMatch()) {
        stem = match.captured(1);
        number = match.captured(2).toInt() + 1;
    }
    const QString suffix = current.suffix().isEmpty() ? QString() : "." + current.suffix();
    QString next;
    do {
        next = current.dir().filePath(QString("%1-%2%3").arg(stem).arg(number++).arg(suffix));
    } while (QFileInfo::exists(next));
    record_path_->setText(next);
}

void RunPanel::set_status(const QString& text) {
    status_->setText(text);
}

} // namespace kvscope::ui
