// Chat prompts in ChatML, the format SmolLM2-Instruct (and Qwen, and others)
// was trained on. Rendered the way the model's own template does, including
// its default system prompt when the conversation brings none.
#pragma once

#include <string>
#include <vector>

namespace kvscope::tokenizer {

class Tokenizer;

struct ChatMessage {
    std::string role; // "system", "user" or "assistant"
    std::string content;
};

// SmolLM2-Instruct's system prompt, used when the first message is not "system".
inline constexpr const char* smollm2_default_system_prompt =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// "<|im_start|>role\ncontent<|im_end|>\n" per message, then
// "<|im_start|>assistant\n" when `add_generation_prompt` is set.
std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& default_system_prompt = smollm2_default_system_prompt);

// The system prompt the model's own chat template puts first when a
// conversation brings none: the literal text after "<|im_start|>system\n" in
// tokenizer.chat_template (SmolLM2's "You are a helpful AI assistant named
// SmolLM...", Qwen2.5's "You are Qwen..."); empty where the template has none
// (Qwen3) or the file no template.
std::string default_system_prompt(const Tokenizer& tokenizer);

// Whether the vocabulary has ChatML's markers as tokens (SmolLM2, Qwen: yes;
// Gemma, Llama 3: no, their templates differ).
bool speaks_chatml(const Tokenizer& tokenizer);

// A conversation for `tokenizer`: ChatML where it speaks it (with its
// default_system_prompt), else the messages' contents one after another, a
// blank line apart (a base model's plain text; no template kvscope does not
// know is guessed at).
std::string render_conversation(const Tokenizer& tokenizer,
                                const std::vector<ChatMessage>& messages);

} // namespace kvscope::tokenizer
