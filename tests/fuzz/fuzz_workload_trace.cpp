// kvscope's workload JSONL, as `kvscope run --workload FILE` and `kvscope
// simulate` read it: the contract is WorkloadError / TraceError naming the
// line, nothing else, and a trace's requests always become prompt tokens.
#include "engine/sim/kvscope_trace.h"
#include "engine/sim/trace_reader.h"
#include "engine/workload/workload.h"
#include "tests/fuzz/fuzz_file.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace kvscope;

namespace {

// Errors begin with the file (and line) they are about.
void expect_named(const std::exception& error, const std::string& where) {
    if (std::string_view(error.what()).find(where) != 0) {
        std::fprintf(stderr, "fuzz_workload_trace: an error that does not begin with %s: %s\n",
                     where.c_str(), error.what());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        (void)workload::parse_trace(text, "fuzz.jsonl");
    } catch (const workload::WorkloadError& error) {
        expect_named(error, "fuzz.jsonl:");
    }

    // The simulator's reader of the same format, without a tokenizer: text
    // prompts are refused with a reason, token-id prompts replay.
    static fuzz::FuzzFile input("trace.jsonl");
    const auto& path = input.write(data, size);
    try {
        sim::KvscopeTrace trace(path.string(), {});
        while (const auto request = trace.next()) {
            (void)sim::trace_prompt_tokens(*request, 49152);
        }
    } catch (const sim::TraceError& error) {
        expect_named(error, path.string());
    }
    return 0;
}
