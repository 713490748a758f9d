// How the app hands work and results between its threads through Qt: a task
// queued on a thread pool, a call queued to the thread an object lives on, a
// worker's signal emitted on its owner's thread. Qt orders these (a mutex
// guards each queue), but Debian's Qt is not built with ThreadSanitizer, which
// sees none of that ordering and would report every value handed over as a
// race. So under ThreadSanitizer each hand-off also tells it directly: the
// sender releases a key the receiver acquires before it touches what it got.
// In other builds the annotations are empty and these are plain Qt calls.
//
// Hand values over by capture (copies, or shared immutable state); anything
// both threads touch afterwards needs its own lock or atomic, which
// ThreadSanitizer checks.
#pragma once

#include <functional>
#include <utility>

#include <QMetaObject>
#include <QObject>
#include <QThread>
#include <QThreadPool>

#if defined(__SANITIZE_THREAD__)
#define KVSCOPE_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVSCOPE_THREAD_SANITIZER 1
#endif
#endif

#ifdef KVSCOPE_THREAD_SANITIZER
extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
#endif

namespace kvscope::ui {

namespace handoff_detail {

#ifdef KVSCOPE_THREAD_SANITIZER
inline void release(const void* key) {
    __tsan_release(const_cast<void*>(key));
}
inline void acquire(const void* key) {
    __tsan_acquire(const_cast<void*>(key));
}
// The queued call's own storage is written after the release (Qt builds it
// inside invokeMethod) and read by the receiver, which is ordered only by
// Qt's queue: those writes go unrecorded rather than reported.
class UnrecordedWrites {
public:
    UnrecordedWrites() { AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
    ~UnrecordedWrites() { AnnotateIgnoreWritesEnd(__FILE__, __LINE__); }
    UnrecordedWrites(const UnrecordedWrites&) = delete;
    UnrecordedWrites& operator=(const UnrecordedWrites&) = delete;
};
#else
inline void release(const void*) {}
inline void acquire(const void*) {}
class UnrecordedWrites {};
#endif

// The key of tasks queued on a pool: a fixed address, because a task must
// acquire before it reads anything it was given, its captures included.
inline const void* pool_task_key() {
    static const char key = 0;
    return &key;
}

} // namespace handoff_detail

// Runs `task` on one of `pool`'s threads.
template <class Task>
void run_on_pool(QThreadPool& pool, Task task) {
    std::function<void()> queued = [task = std::move(task)]() mutable {
        handoff_detail::acquire(handoff_detail::pool_task_key());
        task();
    };
    handoff_detail::release(handoff_detail::pool_task_key());
    pool.start(std::move(queued));
}

// Runs `call` on the thread `context` lives on, from its event loop; dropped
// if `context` is destroyed first.
template <class Call>
void run_on_thread_of(QObject* context, Call call) {
    handoff_detail::release(context->thread());
    [[maybe_unused]] const handoff_detail::UnrecordedWrites unrecorded;
    QMetaObject::invokeMethod(
        context,
        [call = std::move(call)]() mutable {
            handoff_detail::acquire(QThread::currentThread());
            call();
        },
        Qt::QueuedConnection);
}

// Emits `sender`'s `signal` with `args` on the thread `sender` lives on: how a
// worker reports to its owner, so every receiver (a QSignalSpy, which
// connects directly, included) runs on the owner's thread.
template <class Sender, class... Params, class... Args>
void emit_on_own_thread(Sender* sender, void (Sender::*signal)(Params...), Args... args) {
    run_on_thread_of(sender, [sender, signal, args...] { (sender->*signal)(args...); });
}

} // namespace kvscope::ui
