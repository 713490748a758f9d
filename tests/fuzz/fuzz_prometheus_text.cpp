// An engine's /metrics page (Prometheus text format) as `kvscope attach
// --metrics` polls it. The parser's contract: never throws, whatever the
// bytes; every sample it keeps has a name.
#include "profiler/attach/prometheus_text.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

using namespace kvscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const attach::PrometheusText page = attach::parse_prometheus_text(text);
    for (const attach::PrometheusSample& sample : page.samples) {
        if (sample.name.empty()) {
            std::fprintf(stderr, "fuzz_prometheus_text: a sample without a name\n");
            std::abort();
        }
        (void)page.type_of(sample.name);
        (void)sample.label("le");
    }
    return 0;
}
