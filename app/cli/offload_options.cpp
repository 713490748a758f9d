#include "app/cli/offload_options.h"

namespace kvscope::cli {

void OffloadOptions::add_to(CLI::App& app) {
    app.add_option("--offload-tier", tier,
                   "A second tier for blocks the KV pool reclaims, loaded back on a prefix hit: "
                   "memory (host memory) or file (a file on disk, real I/O)")
        ->check(CLI::IsMember({"none", "memory", "file"}))
        ->capture_default_str();
    app.add_option("--offload-blocks", blocks, "Blocks the offload tier holds (LRU when full)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32));
    app.add_option("--offload-file", file,
                   "The file tier's file (default: one in the temporary directory); removed at "
                   "the end");
    app.add_flag("--offload-write-through", write_through,
                 "Write blocks to the tier as soon as they are cached, not when reclaimed");
}

std::string OffloadOptions::apply(session::RunConfig& config) const {
    if (tier == "none") {
        if (blocks > 0 || !file.empty() || write_through) {
            return "--offload-blocks, --offload-file and --offload-write-through need "
                   "--offload-tier memory or file";
        }
        return {};
    }
    if (blocks <= 0) {
        return "--offload-tier " + tier + " needs --offload-blocks N";
    }
    if (!file.empty() && tier != "file") {
        return "--offload-file goes with --offload-tier file";
    }
    if (!config.prefix_caching) {
        return "the offload tier keeps prefix-cached blocks: it needs prefix caching";
    }
    config.offload.medium = tier == "file" ? kv::TierMedium::file : kv::TierMedium::memory;
    config.offload.capacity_blocks = blocks;
    config.offload.file = file; // empty: the tier makes one of its own
    config.offload_write_through = write_through;
    return {};
}

} // namespace kvscope::cli
