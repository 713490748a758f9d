#include "app/ui/run/run_settings.h"

namespace kvscope::ui {

RunSettings::RunSettings() {
    backend.kind = session::BackendKind::automatic;
    cache.num_blocks = 256;
    scheduler.max_num_seqs = 16;
    scheduler.max_num_batched_tokens = 512;
    preset.requests = 24;
    preset.rate = 3.0;
    preset.max_tokens = 48;
    preset.seed = 1;
    real_time = true;
    record_ops = true; // the timeline's CPU ops
    token_text = true; // the requests table's text and the block map's tooltips
}

} // namespace kvscope::ui
