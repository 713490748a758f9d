// Access to the golden data made by scripts/reference/make_golden.py from
// llama.cpp and transformers, and to the model it was made with.
#pragma once

#include "engine/model_path.h"

#include <cstdint>
#include <vector>

#include <QCryptographicHash>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

namespace kvscope::test {

// golden_smollm2.json (the default model's) or golden_gemma3.json.
inline QJsonObject load_golden(const char* name = "golden_smollm2.json") {
    QFile file(QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/engine/data/") + name);
    if (!file.open(QIODevice::ReadOnly)) {
        return {};
    }
    return QJsonDocument::fromJson(file.readAll()).object();
}

// Empty when `model` is the file the golden data was made with; otherwise why
// the golden comparison cannot run.
inline QString golden_model_problem(const QJsonObject& golden, const ModelPath& model) {
    if (const std::string problem = model_path_problem(model); !problem.empty()) {
        return QString::fromStdString(problem);
    }
    QFile file(QString::fromStdString(model.path.string()));
    if (!file.open(QIODevice::ReadOnly)) {
        return "cannot read " + file.fileName();
    }
    QCryptographicHash hash(QCryptographicHash::Sha256);
    hash.addData(&file);
    if (hash.result().toHex() != golden.value("model_sha256").toString().toLatin1()) {
        return file.fileName() + " is not the model the golden data was made with (" +
               golden.value("model_file").toString() + ")";
    }
    return {};
}

// The same for the model the engine would load (KVSCOPE_MODEL or SmolLM2).
inline QString golden_model_problem(const QJsonObject& golden) {
    return golden_model_problem(golden, resolve_model_path());
}

inline std::string golden_model_path() {
    return resolve_model_path().path.string();
}

// Gemma 3 270M where scripts/setup.sh caches it (KVSCOPE_MODEL names the
// default model only).
inline ModelPath gemma3_model_path() {
    return {model_cache_dir() / gemma3_model_file_name, false};
}

// A top-1 margin (the logit gap between the reference's two best tokens)
// below this is a near-tie: float differences in the last bits may pick the
// other token legitimately, and every token after it then differs too.
inline constexpr double kNearTieMargin = 0.05;

// The greedy tokens a golden case (an entry of "greedy") pins down:
// transformers' tokens before the first step whose top-1 margin is below
// `near_tie`.
inline std::vector<std::int32_t> greedy_tokens_before_near_tie(const QJsonObject& golden_case,
                                                               double near_tie = kNearTieMargin) {
    const QJsonArray tokens = golden_case.value("tokens").toArray();
    const QJsonArray margins = golden_case.value("top1_margins").toArray();
    std::vector<std::int32_t> pinned;
    for (qsizetype t = 0; t < tokens.size() && t < margins.size(); ++t) {
        if (margins[t].toDouble() < near_tie) {
            break;
        }
        pinned.push_back(tokens[t].toInt());
    }
    return pinned;
}

// Empty when `generated` starts with the tokens greedy_tokens_before_near_tie()
// pins down; otherwise the first difference, to print.
inline QString greedy_mismatch(const QJsonObject& golden_case,
                               const std::vector<std::int32_t>& generated,
                               double near_tie = kNearTieMargin) {
    const std::vector<std::int32_t> pinned = greedy_tokens_before_near_tie(golden_case, near_tie);
    const QString prompt = golden_case.value("prompt").toString();
    for (std::size_t t = 0; t < pinned.size(); ++t) {
        if (t >= generated.size()) {
            return QString("'%1': %2 tokens generated, the reference pins %3 (no near-tie before)")
                .arg(prompt)
                .arg(generated.size())
                .arg(pinned.size());
        }
        if (generated[t] != pinned[t]) {
            return QString("'%1': token %2 is %3, transformers has %4 (top-1 margin %5, no "
                           "near-tie before)")
                .arg(prompt)
                .arg(t)
                .arg(generated[t])
                .arg(pinned[t])
                .arg(golden_case.value("top1_margins")
                         .toArray()[static_cast<qsizetype>(t)]
                         .toDouble());
        }
    }
    return {};
}

} // namespace kvscope::test
