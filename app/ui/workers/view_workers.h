// The threads the views build and free on (background_build.h,
// free_on_worker.h): a pool of their own. Qt's raster paint engine splits
// large fills over the global pool and waits for them, so builds queued
// there held the window's paints back by a hundred milliseconds and more.
// Used from the window's thread only.
#pragma once

#include <QCoreApplication>
#include <QPointer>
#include <QThreadPool>

namespace kvscope::ui {

// Null when no application runs. Goes with the application (its destructor
// waits for what still runs).
inline QThreadPool* view_workers() {
    static QPointer<QThreadPool> pool;
    if (pool == nullptr && QCoreApplication::instance() != nullptr) {
        pool = new QThreadPool(QCoreApplication::instance());
        pool->setObjectName("kvscope view workers");
        pool->setMaxThreadCount(2);
    }
    return pool;
}

} // namespace kvscope::ui
