// Demo presets for teaching: each sets up a run that shows one effect live,
// with a short explanation of what to watch and what to try next.
#pragma once

#include "app/ui/run/run_settings.h"

#include <vector>

#include <QString>

namespace kvscope::ui {

struct TeachingPreset {
    QString id;          // "prefix-caching"
    QString title;       // "Prefix caching"
    QString explanation; // HTML: what happens, where to look, what to change
    RunSettings settings;
};

// The first is the default live demo (kvscope-ui --demo).
const std::vector<TeachingPreset>& teaching_presets();
const TeachingPreset* find_teaching_preset(const QString& id);

} // namespace kvscope::ui
