// Prometheus /metrics pages the engines themselves wrote (vLLM's and
// SGLang's prometheus_client output, tests/profiler/data/metrics), for tests
// that serve or parse them.
#pragma once

#include <fstream>
#include <ios>
#include <sstream>
#include <string>

namespace kvscope::test {

// The page saved as tests/profiler/data/metrics/NAME; empty when missing.
inline std::string metrics_page(const char* name = "vllm.prom") {
    std::ifstream in(std::string(KVSCOPE_SOURCE_DIR) + "/tests/profiler/data/metrics/" + name,
                     std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace kvscope::test
