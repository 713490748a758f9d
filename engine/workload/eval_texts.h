// The evaluation texts shipped in resources/eval (public domain, see
// SOURCES.md there), compiled into the binary so `kvscope eval` and the
// long-doc workload need no files at run time.
#pragma once

#include <string_view>
#include <vector>

namespace kvscope::workload {

struct EvalText {
    std::string_view name; // the file name without .txt
    std::string_view text;
};

const std::vector<EvalText>& eval_texts();
// nullptr when there is no text of that name.
const EvalText* find_eval_text(std::string_view name);

} // namespace kvscope::workload
