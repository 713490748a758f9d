// Which sanitizers this translation unit is built under, as macros a
// preprocessor test can use: KVSCOPE_THREAD_SANITIZER, KVSCOPE_ADDRESS_SANITIZER
// (each defined as 1 or not at all). GCC says so with __SANITIZE_THREAD__ and
// __SANITIZE_ADDRESS__, clang through __has_feature; this is the one place
// that knows both.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define KVSCOPE_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVSCOPE_THREAD_SANITIZER 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define KVSCOPE_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVSCOPE_ADDRESS_SANITIZER 1
#endif
#endif
