#include "kernels/activation_overflow.h"

namespace kvscope::kernels {

namespace {
thread_local unsigned int* current_counter = nullptr;
} // namespace

unsigned int* activation_overflow_counter() {
    return current_counter;
}

ActivationOverflowScope::ActivationOverflowScope(unsigned int* counter)
    : previous_(current_counter) {
    current_counter = counter;
}

ActivationOverflowScope::~ActivationOverflowScope() {
    current_counter = previous_;
}

} // namespace kvscope::kernels
