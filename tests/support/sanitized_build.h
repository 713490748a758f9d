// Whether this test binary was built under AddressSanitizer or ThreadSanitizer
// (the sanitize and tsan presets). Suites that take the real model through
// many steps run a smaller workload there: the sanitizers slow the engine's
// arithmetic several times over, while the code paths they check are the same
// after a few steps as after hundreds.
#pragma once

#include "engine/util/sanitizer_build.h"

namespace kvscope::test {

#if defined(KVSCOPE_ADDRESS_SANITIZER) || defined(KVSCOPE_THREAD_SANITIZER)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// How many times longer a wait for the real model may take: three in a
// sanitized build (whose test preset also lets a test function run 15
// minutes instead of QtTest's 5).
inline constexpr int kSlowdown = kSanitizedBuild ? 3 : 1;

// `full` in a plain build, `sanitized` under a sanitizer.
template <typename T>
constexpr T full_or_sanitized(T full, T sanitized) {
    return kSanitizedBuild ? sanitized : full;
}

} // namespace kvscope::test

// Leaves the test function (or data row) out in a sanitized build, for checks
// of numerics that the plain build makes and that reach no code the sanitized
// run does not reach elsewhere. `why` names what stands in for it there.
// It returns with a note instead of QSKIP: ctest marks a suite that prints a
// SKIP line as skipped (how GPU suites say so without a GPU), which would hide
// whether the rest of the suite passed under the sanitizer.
#define KVSCOPE_LEAVE_OUT_WHEN_SANITIZED(why)                                                      \
    do {                                                                                           \
        if constexpr (::kvscope::test::kSanitizedBuild) {                                          \
            qInfo("left out under a sanitizer (numerics checked by the plain build): " why);       \
            return;                                                                                \
        }                                                                                          \
    } while (false)
