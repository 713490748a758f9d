// Which of the CPU backend's kernel sets runs: the widest this CPU has, or a
// narrower one KVSCOPE_CPU_KERNELS asks for ("avx512", "avx2", "scalar"), so
// the tests run each set the machine has and a benchmark can compare them.
// Every vectorised kernel (matmul, attention, activations) asks here.
#pragma once

namespace kvscope::cpu {

enum class KernelSet { scalar, avx2, avx512 };

// Read once; an unknown KVSCOPE_CPU_KERNELS is said on stderr and ignored.
KernelSet kernel_set();

// "avx512-vnni", "avx2", "scalar": what a run's backend line says.
const char* kernel_set_name(KernelSet set);

} // namespace kvscope::cpu
