// Frees on a worker thread what takes long to free: a copy of an attached
// engine's 160,000 resident blocks, a forest of as many rows. The window's
// thread drops such values several times a second while following an
// attach, and freeing them there took tens of milliseconds each time.
#pragma once

#include <memory>
#include <utility>

#include <QCoreApplication>
#include <QThreadPool>

namespace kvscope::ui {

// Destroys `value` on the global thread pool (here, when no application runs).
template <class T>
void free_on_worker(T value) {
    if (QCoreApplication::instance() == nullptr) {
        return; // `value` goes here
    }
    auto held = std::make_shared<T>(std::move(value));
    QThreadPool::globalInstance()->start([held = std::move(held)]() mutable { held.reset(); });
}

// A shared, immutable value whose last owner, on whatever thread, has it
// freed on a worker.
template <class T>
std::shared_ptr<const T> make_shared_freed_on_worker(T value) {
    return std::shared_ptr<const T>(new T(std::move(value)), [](const T* gone) {
        std::unique_ptr<const T> owned(gone);
        if (QCoreApplication::instance() != nullptr) {
            QThreadPool::globalInstance()->start(
                [owned = std::shared_ptr<const T>(std::move(owned))]() mutable { owned.reset(); });
        }
    });
}

} // namespace kvscope::ui
