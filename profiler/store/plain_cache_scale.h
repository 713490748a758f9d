// How many of a hybrid cache's blocks a plain cache of the same model holds
// for each block of a whole-context group: a plain block keeps every layer,
// a hybrid one `layers_per_block` layer slots, so a plain cache holds
// layers / layers_per_block of them wherever a global group holds one block
// (Gemma 3 270M: 18 / 3 = 6; Gemma 3 1B: 26 / 4 = 6.5, its last window group
// padded with empty slots). Read from a run's settings (the run_config
// event's JSON: "kv_groups" with each group's layers, "layers_per_block").
#pragma once

#include <string_view>

namespace kvscope::profiler {

// 0 when the settings are not a hybrid cache's or say no layers.
double plain_cache_scale(std::string_view run_config_json);

} // namespace kvscope::profiler
