// What one live run in the app is made of: the run panel edits it, the
// teaching presets fill it in, the engine controller hands it to a
// ServingSession. A session::RunConfig (the same one `kvscope run` fills
// from its options) plus where to record; defaults make a run that shows
// paging, prefix hits and a full timeline within seconds on a laptop CPU.
#pragma once

#include "engine/session/run_config.h"

#include <string>

namespace kvscope::ui {

struct RunSettings : session::RunConfig {
    std::string record_path; // empty: not recorded

    RunSettings();
};

} // namespace kvscope::ui
