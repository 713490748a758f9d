#include "engine/sim/cost_model.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace kvscope::sim {

double CostModel::seconds(const StepWork& work) const {
    return step_s + prefill_token_s * static_cast<double>(work.prefill_tokens) +
           decode_sequence_s * static_cast<double>(work.decode_sequences) +
           kv_token_read_s * static_cast<double>(work.kv_tokens_read);
}

CostModel CostModel::llama3_8b_h100_estimate() {
    CostModel model;
    model.step_s = 16e9 / 3e12;
    model.prefill_token_s = 16e9 / 400e12;
    model.decode_sequence_s = 16e9 / 400e12;
    model.kv_token_read_s = 131072.0 / 3e12;
    model.source = "roofline estimate: Llama-3-8B on one H100 (not measured)";
    return model;
}

CostModel CostModel::from_json(const std::string& text) {
    nlohmann::json object;
    try {
        object = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw std::invalid_argument(std::string("a cost model is JSON: ") + e.what());
    }
    if (!object.is_object()) {
        throw std::invalid_argument("a cost model is a JSON object");
    }
    CostModel model;
    const auto read = [&object](const char* name, double& out) {
        const auto it = object.find(name);
        if (it == object.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
            it->get<double>() < 0) {
            throw std::invalid_argument(std::string("the cost model's \"") + name +
                                        "\" (seconds, not negative) is missing or not a number");
        }
        out = it->get<double>();
    };
    read("step_s", model.step_s);
    read("prefill_token_s", model.prefill_token_s);
    read("decode_sequence_s", model.decode_sequence_s);
    read("kv_token_read_s", model.kv_token_read_s);
    if (const auto source = object.find("source"); source != object.end() && source->is_string()) {
        model.source = source->get<std::string>();
    }
    return model;
}

std::string CostModel::to_json() const {
    return nlohmann::json{{"step_s", step_s},
                          {"prefill_token_s", prefill_token_s},
                          {"decode_sequence_s", decode_sequence_s},
                          {"kv_token_read_s", kv_token_read_s},
                          {"source", source}}
        .dump();
}

} // namespace kvscope::sim
