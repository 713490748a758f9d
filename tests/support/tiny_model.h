// The tiny random-weight Llama model committed under tests/engine/data (made
// by make_tiny_llama_gguf.py): for tests of the serving path that need a
// model file but not the real model's outputs, so they run without it.
#pragma once

inline const char* tiny_model_path() {
    return KVSCOPE_SOURCE_DIR "/tests/engine/data/tiny_llama.gguf";
}
