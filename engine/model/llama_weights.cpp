#include "engine/model/llama_weights.h"

#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_file.h"

#include <string>

namespace kvscope::model {
namespace {

TensorView matrix(const gguf::GgufFile& file, const std::string& name, int rows, int cols) {
    const gguf::TensorInfo& tensor = file.require_tensor(name);
    if (tensor.shape.size() != 2 || tensor.shape[0] != static_cast<std::uint64_t>(cols) ||
        tensor.shape[1] != static_cast<std::uint64_t>(rows)) {
        file.fail("tensor '" + name + "' has shape " + tensor.shape_string() + ", expected [" +
                  std::to_string(cols) + ", " + std::to_string(rows) + "]");
    }
    if (!gguf::can_dequantize(tensor.type)) {
        file.fail("tensor '" + name + "' has type " +
                  std::string(gguf::tensor_type_name(tensor.type)) +
                  ", which kvscope cannot compute with yet");
    }
    TensorView w;
    w.type = tensor.type;
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = static_cast<std::size_t>(tensor.byte_size / tensor.rows());
    w.data = file.tensor_bytes(tensor).data();
    return w;
}

std::vector<float> vector(const gguf::GgufFile& file, const std::string& name, int length) {
    const gguf::TensorInfo& tensor = file.require_tensor(name);
    if (tensor.element_count != static_cast<std::uint64_t>(length) ||
        !gguf::can_dequantize(tensor.type)) {
        file.fail("tensor '" + name + "' should hold " + std::to_string(length) + " values, has " +
                  tensor.shape_string() + " of " +
                  std::string(gguf::tensor_type_name(tensor.type)));
    }
    std::vector<float> values(static_cast<std::size_t>(length));
    gguf::dequantize_values(tensor.type, file.tensor_bytes(tensor).data(), values.data(), length);
    return values;
}

} // namespace

LlamaWeights LlamaWeights::from_gguf(const gguf::GgufFile& file, const LlamaConfig& c) {
    LlamaWeights weights;
    const int q_width = c.heads * c.head_dim;
    const int kv_width = c.kv_heads * c.head_dim;
    weights.token_embedding = matrix(file, "token_embd.weight", c.vocab, c.hidden);
    for (int l = 0; l < c.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        LayerWeights layer;
        layer.attn_norm = vector(file, p + "attn_norm.weight", c.hidden);
        layer.wq = matrix(file, p + "attn_q.weight", q_width, c.hidden);
        layer.wk = matrix(file, p + "attn_k.weight", kv_width, c.hidden);
        layer.wv = matrix(file, p + "attn_v.weight", kv_width, c.hidden);
        if (c.traits.qkv_bias) {
            layer.q_bias = vector(file, p + "attn_q.bias", q_width);
            layer.k_bias = vector(file, p + "attn_k.bias", kv_width);
            layer.v_bias = vector(file, p + "attn_v.bias", kv_width);
        }
        if (c.traits.qk_norm) {
            layer.q_norm = vector(file, p + "attn_q_norm.weight", c.head_dim);
            layer.k_norm = vector(file, p + "attn_k_norm.weight", c.head_dim);
        }
        layer.wo = matrix(file, p + "attn_output.weight", c.hidden, q_width);
        layer.ffn_norm = vector(file, p + "ffn_norm.weight", c.hidden);
        layer.w_gate = matrix(file, p + "ffn_gate.weight", c.ffn_hidden, c.hidden);
        layer.w_up = matrix(file, p + "ffn_up.weight", c.ffn_hidden, c.hidden);
        layer.w_down = matrix(file, p + "ffn_down.weight", c.hidden, c.ffn_hidden);
        if (c.traits.post_norms) {
            layer.post_attn_norm = vector(file, p + "post_attention_norm.weight", c.hidden);
            layer.post_ffn_norm = vector(file, p + "post_ffw_norm.weight", c.hidden);
        }
        weights.layers.push_back(std::move(layer));
    }
    weights.output_norm = vector(file, "output_norm.weight", c.hidden);
    weights.output = c.tied_embeddings ? weights.token_embedding
                                       : matrix(file, "output.weight", c.vocab, c.hidden);
    return weights;
}

std::int64_t LlamaWeights::total_bytes() const {
    std::int64_t bytes = output.bytes();
    for (const LayerWeights& l : layers) {
        bytes += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes() + l.w_gate.bytes() +
                 l.w_up.bytes() + l.w_down.bytes();
        for (const std::vector<float>* v :
             {&l.attn_norm, &l.q_bias, &l.k_bias, &l.v_bias, &l.q_norm, &l.k_norm,
              &l.post_attn_norm, &l.ffn_norm, &l.post_ffn_norm}) {
            bytes += static_cast<std::int64_t>(v->size() * sizeof(float));
        }
    }
    return bytes;
}

} // namespace kvscope::model
