// GGUF files from anywhere: the reader, every dequantiser a tensor of the
// file reaches, the model config, the tokenizer and the whole model load.
// The contract: GgufError (naming the file) for anything wrong, nothing else.
#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/llama_config.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_file.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

using namespace kvscope;

namespace {

// Dequantises up to two rows of every tensor the converters handle: every
// block layout is reached without paying for a whole weight matrix.
void dequantize_some(const gguf::GgufFile& file) {
    std::vector<float> values;
    for (const gguf::TensorInfo& tensor : file.tensors()) {
        if (!gguf::can_dequantize(tensor.type)) {
            continue;
        }
        const std::uint64_t count =
            std::min<std::uint64_t>(tensor.element_count, 2 * tensor.shape[0]);
        if (count > (std::uint64_t{1} << 20)) {
            continue; // a real model's row; the seeds' small tensors cover the layouts
        }
        values.resize(count);
        gguf::dequantize_values(tensor.type, file.tensor_bytes(tensor).data(), values.data(),
                                static_cast<std::int64_t>(count));
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static fuzz::FuzzFile input("model.gguf");
    const auto& path = input.write(data, size);
    try {
        const gguf::GgufFile file = gguf::GgufFile::open(path);
        for (const gguf::MetadataEntry& entry : file.metadata()) {
            (void)entry.value.describe();
        }
        dequantize_some(file);
        try {
            (void)model::LlamaConfig::from_gguf(file);
        } catch (const gguf::GgufError&) {
        }
        try {
            const tokenizer::Tokenizer tokens = tokenizer::Tokenizer::from_gguf(file);
            const auto ids = tokens.encode("<|im_start|>user\nHello, wörld! 123<|im_end|>", true);
            (void)tokens.decode(ids, true);
        } catch (const gguf::GgufError&) {
        }
        (void)model::LlamaModel::load(path);
    } catch (const gguf::GgufError& error) {
        if (std::string_view(error.what()).find(path.string()) == std::string_view::npos) {
            std::fprintf(stderr, "fuzz_gguf: an error that does not name the file: %s\n",
                         error.what());
            std::abort();
        }
    }
    return 0;
}
