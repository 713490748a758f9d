#include "engine/util/runnable_threads.h"

#if defined(__linux__)
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace kvscope {

int machine_runnable_threads() noexcept {
#if defined(__linux__)
    // "0.52 0.58 0.59 3/467 12345": load averages, then runnable/all threads.
    const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    char text[128];
    ssize_t bytes = 0;
    do {
        bytes = read(fd, text, sizeof text - 1);
    } while (bytes < 0 && errno == EINTR);
    close(fd);
    if (bytes <= 0) {
        return -1;
    }
    text[bytes] = '\0';
    const char* field = text;
    for (int skip = 0; skip < 3; ++skip) {
        field = std::strchr(field, ' ');
        if (field == nullptr) {
            return -1;
        }
        ++field;
    }
    char* end = nullptr;
    const long runnable = std::strtol(field, &end, 10);
    if (end == field || *end != '/' || runnable < 1 || runnable > INT_MAX) {
        return -1;
    }
    return static_cast<int>(runnable);
#else
    return -1;
#endif
}

int whole_machine_cpus() noexcept {
#if defined(__linux__)
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (online <= 0 || online > CPU_SETSIZE ||
        sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) != online) {
        return -1;
    }
    return static_cast<int>(online);
#else
    return -1;
#endif
}

} // namespace kvscope
