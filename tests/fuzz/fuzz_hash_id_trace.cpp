// Production traces that name prompts by block hash ids (Mooncake,
// Qwen-Bailian), as `kvscope simulate` reads them, and the format detection
// in front of them. The first byte picks the format; the rest is the file.
// The contract: TraceError naming FILE:LINE, nothing else, and every request
// read becomes its prompt tokens.
#include "engine/sim/trace_reader.h"
#include "tests/fuzz/fuzz_file.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

using namespace kvscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    static const sim::TraceFormat formats[] = {
        sim::TraceFormat::automatic, sim::TraceFormat::mooncake, sim::TraceFormat::qwen_bailian};
    const sim::TraceFormat format = formats[data[0] % 3];
    static fuzz::FuzzFile input("trace.jsonl");
    const auto& path = input.write(data + 1, size - 1);
    try {
        const auto trace = sim::open_trace(path.string(), format);
        while (const auto request = trace->next()) {
            (void)sim::trace_prompt_tokens(*request, 49152);
        }
        (void)trace->warnings();
    } catch (const sim::TraceError& error) {
        // FILE:LINE, or the file alone when it cannot be opened or is empty.
        if (std::string_view(error.what()).find(path.string()) != 0) {
            std::fprintf(stderr, "fuzz_hash_id_trace: an error that does not name the file: %s\n",
                         error.what());
            std::abort();
        }
    }
    return 0;
}
