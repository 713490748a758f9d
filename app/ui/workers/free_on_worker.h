// Frees on a worker thread what takes long to free: a copy of an attached
// engine's 160,000 resident blocks, a forest of as many rows, a long run's
// store. The window's thread drops such values several times a second while
// following an attach, and freeing them there took tens of milliseconds
// each time. Elsewhere than the window's thread they are freed on the spot.
#pragma once

#include "app/ui/workers/thread_handoff.h"
#include "app/ui/workers/view_workers.h"

#include <memory>
#include <utility>

#include <QThread>

namespace kvscope::ui {

inline bool on_window_thread() {
    return QCoreApplication::instance() != nullptr &&
           QThread::currentThread() == QCoreApplication::instance()->thread();
}

// Destroys `value` on a view worker when called on the window's thread.
template <class T>
void free_on_worker(T value) {
    if (!on_window_thread()) {
        return; // `value` goes here
    }
    auto held = std::make_shared<T>(std::move(value));
    run_on_pool(*view_workers(), [held = std::move(held)]() mutable { held.reset(); });
}

// A shared, immutable value freed as free_on_worker() frees, wherever its
// last owner lets go of it.
template <class T>
std::shared_ptr<const T> make_shared_freed_on_worker(T value) {
    return std::shared_ptr<const T>(new T(std::move(value)), [](const T* gone) {
        free_on_worker(std::unique_ptr<const T>(gone));
    });
}

} // namespace kvscope::ui
