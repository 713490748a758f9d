// How the app hands work and results between its threads through Qt's
// queues: a task queued on a thread pool, a call queued to the thread an
// object lives on, a worker's signal emitted on its owner's thread. Qt orders
// these (a mutex guards each queue), but Debian's Qt is not built with
// ThreadSanitizer, which sees none of that ordering and would report every
// value handed over as a race. So under ThreadSanitizer each hand-off also
// tells it directly: what is handed over travels in a parcel of its own on the
// heap, whose address the sender releases after packing it and the receiver
// acquires before opening it (and releases when done, for whichever thread
// frees it). One key per hand-off, so a receiver is ordered after what its
// own sender did and nothing else. In other builds the
// annotations are empty and this is one allocation more per hand-off.
//
// Hand values over by capture (copies, or shared immutable state); anything
// both threads touch afterwards needs its own lock or atomic, which
// ThreadSanitizer checks.
#pragma once

#include "engine/util/sanitizer_build.h"

#include <memory>
#include <type_traits>
#include <utility>

#include <QMetaObject>
#include <QObject>
#include <QRunnable>
#include <QThread>
#include <QThreadPool>

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
// Memory accesses in this scope go unrecorded: Qt's queued call, built after
// the release and read by the receiver before it can acquire, holds nothing
// but the parcel's pointer. (ThreadSanitizer ignores reads here too.)
class Unrecorded {
public:
    Unrecorded() { AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
    ~Unrecorded() { AnnotateIgnoreWritesEnd(__FILE__, __LINE__); }
    Unrecorded(const Unrecorded&) = delete;
    Unrecorded& operator=(const Unrecorded&) = delete;
};
#else
inline void release(const void*) {}
inline void acquire(const void*) {}
class Unrecorded {};
#endif

// What one hand-off carries. Whichever thread frees it acquires its key
// first, after the receiver released it again when done: the last owner is
// often the sender, whose Qt-side reference (counted inside Qt, where
// ThreadSanitizer cannot see) outlives a call run at once.
template <class F>
struct Parcel {
    F contents;
    ~Parcel() { acquire(this); }
};

template <class F>
std::shared_ptr<Parcel<F>> pack(F contents) {
    return std::make_shared<Parcel<F>>(Parcel<F>{std::move(contents)});
}

// On the receiving thread: the parcel's pointer is read before the acquire,
// unrecorded, then its contents run, then the key is released again for the
// thread that frees the parcel.
template <class F>
void open_and_run(const std::shared_ptr<Parcel<F>>& parcel) {
    Parcel<F>* opened = nullptr;
    {
        [[maybe_unused]] const Unrecorded unrecorded;
        opened = parcel.get();
    }
    acquire(opened);
    opened->contents();
    release(opened);
}

} // namespace handoff_detail

// Runs `task` on one of `pool`'s threads.
template <class Task>
void run_on_pool(QThreadPool& pool, Task task) {
    auto parcel = handoff_detail::pack(std::move(task));
    // The runnable is made before the release: newer Qt builds it in its
    // headers, where ThreadSanitizer would see the writes.
    QRunnable* runnable = QRunnable::create([parcel] { handoff_detail::open_and_run(parcel); });
    handoff_detail::release(parcel.get());
    pool.start(runnable);
}

// Runs `call` on the thread `context` lives on, from its event loop; dropped
// if `context` is destroyed first.
template <class Call>
void run_on_thread_of(QObject* context, Call call) {
    auto parcel = handoff_detail::pack(std::move(call));
    handoff_detail::release(parcel.get());
    [[maybe_unused]] const handoff_detail::Unrecorded unrecorded;
    QMetaObject::invokeMethod(
        context, [parcel] { handoff_detail::open_and_run(parcel); }, Qt::QueuedConnection);
}

// Emits `sender`'s `signal` with `args` on the thread `sender` lives on: how a
// worker reports to its owner, so every receiver (a QSignalSpy, which
// connects directly, included) runs on the owner's thread. Each emission is
// a queued call whether anyone listens or not, and a receiver connected with
// Qt::BlockingQueuedConnection on that thread would deadlock.
// `signal` may be one a base class declares (LiveSource::status).
template <class Sender, class Declarer, class... Params, class... Args>
void emit_on_own_thread(Sender* sender, void (Declarer::*signal)(Params...), Args... args) {
    static_assert(std::is_base_of_v<Declarer, Sender>);
    run_on_thread_of(sender, [sender, signal, args...] { (sender->*signal)(args...); });
}

} // namespace kvscope::ui
