// What a simulated step costs: a linear model of the work a forward pass
// does, so a trace replays on a clock without computing the model.
//   seconds = step + prefill_token * tokens computed that are not a
//             sequence's only token this step
//           + decode_sequence * sequences computing one token
//           + kv_token_read * cache entries the step attends over
// The coefficients come from a file (a GPU's figures, measured elsewhere) or
// from measuring the real backend on this machine.
#pragma once

#include <string>

namespace kvscope::sim {

struct StepWork {
    long long prefill_tokens = 0;
    long long decode_sequences = 0;
    long long kv_tokens_read = 0;
};

struct CostModel {
    double step_s = 0;
    double prefill_token_s = 0;
    double decode_sequence_s = 0;
    double kv_token_read_s = 0;
    std::string source; // where the figures come from, for reports

    double seconds(const StepWork& work) const;

    // kvscope simulate's default: a roofline estimate, not a measurement, of
    // Llama-3-8B on one H100 (the weights, 16 GB, read once a step at 3 TB/s;
    // 2 FLOPs per weight per token at 400 TFLOP/s; 128 KiB of K/V per cached
    // token read at 3 TB/s).
    static CostModel llama3_8b_h100_estimate();

    // {"step_s": ..., "prefill_token_s": ..., "decode_sequence_s": ...,
    //  "kv_token_read_s": ..., "source": "..."}; throws std::invalid_argument
    // naming what is missing or negative.
    static CostModel from_json(const std::string& text);
    std::string to_json() const;
};

} // namespace kvscope::sim
