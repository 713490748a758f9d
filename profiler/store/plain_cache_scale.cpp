#include "profiler/store/plain_cache_scale.h"

#include <nlohmann/json.hpp>

namespace kvscope::profiler {

double plain_cache_scale(std::string_view run_config_json) {
    const nlohmann::json settings = nlohmann::json::parse(run_config_json, nullptr, false);
    if (!settings.is_object()) {
        return 0; // an older or foreign recording
    }
    const auto groups = settings.find("kv_groups");
    const auto per_block = settings.find("layers_per_block");
    if (groups == settings.end() || !groups->is_array() || groups->size() < 2 ||
        per_block == settings.end() || !per_block->is_number_integer() ||
        per_block->get<long long>() <= 0) {
        return 0;
    }
    long long layers = 0;
    for (const nlohmann::json& group : *groups) {
        const auto listed = group.is_object() ? group.find("layers") : group.end();
        if (listed == group.end() || !listed->is_array()) {
            return 0; // settings of another shape
        }
        layers += static_cast<long long>(listed->size());
    }
    return static_cast<double>(layers) / static_cast<double>(per_block->get<long long>());
}

} // namespace kvscope::profiler
