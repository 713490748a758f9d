#include "kernels/wide_row_fetch.h"

namespace kvscope::kernels {
namespace {
thread_local WideRowFetch current_fetch = WideRowFetch::registers;
} // namespace

WideRowFetch wide_row_fetch() {
    return current_fetch;
}

WideRowFetchScope::WideRowFetchScope(WideRowFetch fetch)
    : previous_(current_fetch) {
    current_fetch = fetch;
}

WideRowFetchScope::~WideRowFetchScope() {
    current_fetch = previous_;
}

} // namespace kvscope::kernels
