// Attach throughput: one kvscope AttachSession watching N vLLM-style KV-event
// publishers at a total target rate, decoding every batch, keeping the
// AttachedState and (unless --no-record) recording every row through one
// Recorder into a real SQLite file. Prints a Markdown table (or --json):
// events sent, received, recorded rows, lost, rates, the subscriber's CPU per
// event, the recorder's backlog and the subscriber's RSS over the run.
//
//   kvscope-bench-attach [--publishers 8] [--rate 100000] [--duration 30]
//                        [--record FILE | --no-record] [--json] ...
//
// The publishers run in a child process (this binary re-executed with the
// hidden --publish), so their CPU is not the subscriber's thread and the RSS
// sampled here (/proc/self/status) is the subscriber's own. Each publisher is
// an XPUB socket (vLLM's PUB, plus subscription notices so the run starts
// only once every subscriber is connected) paced by one token bucket for the
// total rate; ZeroMQ drops what is beyond its send high-water mark, so a slow
// subscriber never blocks or slows them: what it misses shows up here as
// sequence gaps, counted lost.
#include "bench/attach_workload.h"
#include "bench/process_stats.h"
#include "bench/publisher_process.h"
#include "profiler/attach/attach_session.h"
#include "profiler/recording/recorder.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include <zmq_addon.hpp>

using namespace kvscope;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    int publishers = 8;
    double rate = 100'000; // KV events a second, over all publishers
    double duration_s = 30;
    std::string record = "/tmp/kvscope-bench-attach.sqlite";
    bool no_record = false;
    bool keep = false;
    bool json = false;
    double rss_interval_s = 5;
    int send_hwm = 100'000; // vLLM's ZmqEventPublisher default
    int receive_hwm = 0;    // 0: KvEventSourceOptions' default
    std::size_t resident = 20'000;
    std::uint64_t seed = 1;
    bool publish = false; // hidden: the child
};

// ---- the publisher process -------------------------------------------------

int publish_main(const Options& o) {
    zmq::context_t context(1);
    std::vector<zmq::socket_t> sockets;
    std::vector<bench::PublisherWorkload> workloads;
    for (int i = 0; i < o.publishers; ++i) {
        zmq::socket_t& s = sockets.emplace_back(context, zmq::socket_type::xpub);
        s.set(zmq::sockopt::sndhwm, o.send_hwm);
        s.set(zmq::sockopt::linger, 0);
        s.bind("tcp://127.0.0.1:*");
        workloads.emplace_back(i, o.resident, o.seed * 1000003u + static_cast<std::uint64_t>(i));
        std::printf("%s\n", s.get(zmq::sockopt::last_endpoint).c_str());
    }
    std::fflush(stdout);
    // Every publisher has its subscriber before the clock starts.
    std::vector<bool> subscribed(sockets.size(), false);
    const auto wait_until = Clock::now() + std::chrono::seconds(20);
    while (std::count(subscribed.begin(), subscribed.end(), true) < o.publishers) {
        if (Clock::now() > wait_until) {
            std::fprintf(stderr, "publisher: no subscriber after 20 s\n");
            return 1;
        }
        for (std::size_t i = 0; i < sockets.size(); ++i) {
            zmq::message_t m;
            if (sockets[i].recv(m, zmq::recv_flags::dontwait) && m.size() > 0 &&
                m.data<char>()[0] == 1) {
                subscribed[i] = true;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }

    // One token bucket for the total rate, the publishers taking turns. The
    // bucket holds 20 ms of events: sends bunch up between sleeps (a sleep on
    // a loaded 2-core machine oversleeps by milliseconds) but never make up
    // for more than that after falling behind.
    const double burst = std::max(64.0, o.rate * 0.020);
    double tokens = 0;
    std::int64_t messages = 0;
    std::int64_t events = 0;
    std::int64_t rows = 0; // blocks stored + removed + clears: the rows kvscope writes
    std::int64_t send_failures = 0;
    std::size_t next = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(o.duration_s);
    auto last = start;
    for (;;) {
        const auto now = Clock::now();
        if (now >= end) {
            break;
        }
        tokens =
            std::min(burst, tokens + o.rate * std::chrono::duration<double>(now - last).count());
        last = now;
        if (tokens < 1) {
            std::this_thread::sleep_for(std::chrono::microseconds(500));
            continue;
        }
        while (tokens >= 1) {
            bench::PublisherWorkload& w = workloads[next];
            const bench::Batch& batch = w.next_batch();
            const std::string seq = bench::sequence_frame(batch.sequence);
            std::array<zmq::const_buffer, 3> frames{
                zmq::const_buffer(bench::kTopic, std::strlen(bench::kTopic)),
                zmq::const_buffer(seq.data(), seq.size()),
                zmq::const_buffer(batch.payload.data(), batch.payload.size())};
            // XPUB drops beyond its high-water mark rather than block; a
            // failure here (EAGAIN never happens on XPUB) is counted anyway.
            if (zmq::send_multipart(sockets[next], frames, zmq::send_flags::dontwait)) {
                ++messages;
                events += batch.events;
                rows += batch.rows;
            } else {
                ++send_failures;
            }
            tokens -= static_cast<double>(batch.events);
            next = (next + 1) % sockets.size();
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("done %lld %lld %lld %lld %.6f\n", static_cast<long long>(messages),
                static_cast<long long>(events), static_cast<long long>(rows),
                static_cast<long long>(send_failures), seconds);
    std::fflush(stdout);
    // What is still queued in the sockets goes out while the subscriber
    // drains; it closes our stdin when it is done.
    char byte = 0;
    while (read(STDIN_FILENO, &byte, 1) > 0) {
    }
    return 0;
}

// ---- the subscriber --------------------------------------------------------

double cpu_seconds(const rusage& u) {
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct RssSample {
    double t = 0;
    std::int64_t kib = 0;
};

bench::PublisherProcess start_publishers(const Options& o) {
    return bench::start_publisher_process(
        "/proc/self/exe",
        {"kvscope-bench-attach", "--publish", "--publishers", std::to_string(o.publishers),
         "--rate", std::to_string(o.rate), "--duration", std::to_string(o.duration_s), "--send-hwm",
         std::to_string(o.send_hwm), "--resident", std::to_string(o.resident), "--seed",
         std::to_string(o.seed)});
}

using bench::read_line;
using bench::rss_kib;
using bench::thread_cpu_seconds;

struct Result {
    // publisher side
    std::int64_t sent_messages = 0;
    std::int64_t sent_events = 0;
    std::int64_t sent_rows = 0;
    std::int64_t send_failures = 0;
    double publish_s = 0;
    double publisher_cpu_s = 0;
    // subscriber side
    std::int64_t messages = 0;
    std::int64_t events = 0;
    std::int64_t gaps = 0;
    std::int64_t lost = 0;
    std::int64_t decode_errors = 0;
    std::int64_t rows_emitted = 0;
    std::int64_t rows_recorded = 0;
    std::int64_t max_backlog = 0; // emitted - committed, sampled
    std::int64_t max_queued = 0;  // the recorder's own high-water mark
    std::int64_t full_waits = 0;  // on_event() calls held by a full queue
    double full_wait_s = 0;
    std::int64_t dropped_rows = 0; // by a failed writer
    std::int64_t resident_blocks = 0;
    std::int64_t loss_clears = 0; // AttachedState dropping a source's blocks after a loss
    double receive_s = 0;         // first poll -> last batch
    double drain_s = 0;           // publishing over -> last batch
    double close_s = 0;           // recorder close (indexes, WAL)
    double loop_cpu_s = 0;        // the attach thread
    double process_cpu_s = 0;     // subscriber process: attach + ZeroMQ I/O + recorder writer
    std::int64_t file_bytes = 0;
    std::vector<RssSample> rss;
};

Result run(const Options& o) {
    bench::PublisherProcess child = start_publishers(o);
    attach::AttachOptions options;
    for (int i = 0; i < o.publishers; ++i) {
        const std::string endpoint = read_line(child.out);
        if (endpoint.empty()) {
            throw std::runtime_error("the publisher process gave no endpoint");
        }
        attach::KvEventSourceOptions source;
        source.endpoint = endpoint;
        if (o.receive_hwm > 0) {
            source.receive_hwm = o.receive_hwm;
        }
        options.sources.push_back(source);
    }
    std::optional<profiler::Recorder> recorder;
    if (!o.no_record) {
        recorder.emplace(o.record, std::map<std::string, std::string>{{"bench", "attach"}}, true);
    }
    Result r;
    const rusage before = [] {
        rusage u{};
        getrusage(RUSAGE_SELF, &u);
        return u;
    }();
    const double loop_cpu_before = thread_cpu_seconds();
    attach::AttachSession session(std::move(options), recorder ? &*recorder : nullptr);

    // The child says "done ..." when its publishing time is over; once a
    // second has passed after that without a batch, the stream is drained.
    const auto start = Clock::now();
    auto last_batch = start;
    auto next_rss = start;
    auto next_backlog = start;
    std::optional<Clock::time_point> publishers_done;
    std::string done;
    for (;;) {
        const auto now = Clock::now();
        if (now >= next_rss) {
            r.rss.push_back({std::chrono::duration<double>(now - start).count(), rss_kib()});
            next_rss = now + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(o.rss_interval_s));
        }
        if (recorder && now >= next_backlog) {
            r.max_backlog =
                std::max(r.max_backlog, session.events_emitted() - recorder->stats().events);
            next_backlog = now + std::chrono::milliseconds(20);
        }
        if (session.poll(std::chrono::milliseconds(50)) > 0) {
            last_batch = Clock::now();
        }
        if (!publishers_done) {
            pollfd pipe_fd{fileno(child.out), POLLIN, 0};
            if (::poll(&pipe_fd, 1, 0) > 0) {
                done = read_line(child.out);
                publishers_done = Clock::now();
            }
        }
        if (publishers_done &&
            Clock::now() - std::max(last_batch, *publishers_done) > std::chrono::seconds(1)) {
            break;
        }
    }
    close(child.in);
    int status = 0;
    rusage child_usage{};
    wait4(child.pid, &status, 0, &child_usage);
    session.emit_status();
    r.loop_cpu_s = thread_cpu_seconds() - loop_cpu_before;
    r.receive_s = std::chrono::duration<double>(last_batch - start).count();
    r.drain_s = std::max(0.0, std::chrono::duration<double>(last_batch - *publishers_done).count());
    r.rows_emitted = session.events_emitted();
    for (const auto& source : session.sources()) {
        r.messages += source->counts().messages;
        r.events += source->counts().events;
        r.gaps += source->counts().gaps;
        r.lost += source->counts().lost;
        r.decode_errors += source->counts().decode_errors;
    }
    for (const auto& [id, s] : session.state().sources()) {
        r.resident_blocks += static_cast<std::int64_t>(s.blocks.size());
        r.loss_clears += s.loss_clears;
    }
    if (recorder) {
        const auto closing = Clock::now();
        recorder->close();
        r.close_s = std::chrono::duration<double>(Clock::now() - closing).count();
        const profiler::RecorderStats stats = recorder->stats();
        r.rows_recorded = stats.events;
        r.max_queued = stats.max_queued_events;
        r.full_waits = stats.full_waits;
        r.full_wait_s = static_cast<double>(stats.full_wait_ns) / 1e9;
        r.dropped_rows = stats.dropped_events;
        std::error_code ec;
        r.file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(o.record, ec));
        if (!o.keep) {
            std::filesystem::remove(o.record, ec);
        }
    }
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    r.process_cpu_s = cpu_seconds(after) - cpu_seconds(before);
    r.rss.push_back({std::chrono::duration<double>(Clock::now() - start).count(), rss_kib()});

    long long m = 0, e = 0, rows = 0, f = 0;
    double s = 0;
    if (std::sscanf(done.c_str(), "done %lld %lld %lld %lld %lf", &m, &e, &rows, &f, &s) != 5) {
        throw std::runtime_error("the publisher process failed (status " +
                                 std::to_string(WEXITSTATUS(status)) + ")");
    }
    std::fclose(child.out);
    r.sent_messages = m;
    r.sent_events = e;
    r.sent_rows = rows;
    r.send_failures = f;
    r.publish_s = s;
    r.publisher_cpu_s = cpu_seconds(child_usage);
    return r;
}

void print_table(const Options& o, const Result& r) {
    const double per_s = r.publish_s > 0 ? 1.0 / r.publish_s : 0;
    const auto mib = [](std::int64_t kib) {
        return static_cast<double>(kib) / 1024.0;
    };
    std::int64_t max_rss = 0;
    for (const RssSample& s : r.rss) {
        max_rss = std::max(max_rss, s.kib);
    }
    const RssSample& first = r.rss.front();
    const RssSample& middle = r.rss[r.rss.size() / 2];
    const RssSample& last = r.rss.back();
    std::printf("| what | value |\n| --- | ---: |\n");
    std::printf("| publishers x target rate | %d x %.0f ev/s = %.0f ev/s |\n", o.publishers,
                o.rate / o.publishers, o.rate);
    std::printf("| recording | %s |\n", o.no_record ? "off" : "SQLite (Recorder)");
    std::printf("| publishing time (s) | %.1f |\n", r.publish_s);
    std::printf("| messages sent / received | %lld / %lld |\n",
                static_cast<long long>(r.sent_messages), static_cast<long long>(r.messages));
    std::printf("| KV events sent | %lld (%.0f/s) |\n", static_cast<long long>(r.sent_events),
                static_cast<double>(r.sent_events) * per_s);
    std::printf("| KV events received and decoded | %lld (%.0f/s, %.2f%% of sent) |\n",
                static_cast<long long>(r.events), static_cast<double>(r.events) * per_s,
                r.sent_events > 0
                    ? 100.0 * static_cast<double>(r.events) / static_cast<double>(r.sent_events)
                    : 0.0);
    std::printf("| decoded and recorded over the whole run: events/s (publishing start -> last "
                "batch) | %.0f |\n",
                r.receive_s > 0 ? static_cast<double>(r.events) / r.receive_s : 0.0);
    std::printf("| rows the events imply (blocks) | %lld (%.0f/s) |\n",
                static_cast<long long>(r.sent_rows), static_cast<double>(r.sent_rows) * per_s);
    std::printf("| rows emitted / recorded | %lld / %lld |\n",
                static_cast<long long>(r.rows_emitted), static_cast<long long>(r.rows_recorded));
    std::printf("| lost: sequence gaps not replayed (messages) | %lld in %lld gaps |\n",
                static_cast<long long>(r.lost), static_cast<long long>(r.gaps));
    std::printf("| messages sent - received | %lld |\n",
                static_cast<long long>(r.sent_messages - r.messages));
    std::printf("| send failures / decode errors | %lld / %lld |\n",
                static_cast<long long>(r.send_failures), static_cast<long long>(r.decode_errors));
    std::printf("| drain after publishers stopped (s) | %.2f |\n", r.drain_s);
    std::printf("| attach thread CPU (s) / per event (us) | %.2f / %.2f |\n", r.loop_cpu_s,
                r.events > 0 ? 1e6 * r.loop_cpu_s / static_cast<double>(r.events) : 0.0);
    std::printf("| subscriber process CPU (s) / per event (us) / share of one core | %.2f / %.2f / "
                "%.0f%% |\n",
                r.process_cpu_s,
                r.events > 0 ? 1e6 * r.process_cpu_s / static_cast<double>(r.events) : 0.0,
                100.0 * r.process_cpu_s / std::max(r.receive_s, 1e-9));
    std::printf("| publisher process CPU (s) / share of one core | %.2f / %.0f%% |\n",
                r.publisher_cpu_s, 100.0 * r.publisher_cpu_s / std::max(r.publish_s, 1e-9));
    std::printf("| recorder backlog, max: queued / queued + being written (rows) | %lld / %lld "
                "|\n",
                static_cast<long long>(r.max_queued), static_cast<long long>(r.max_backlog));
    std::printf("| attach loop held by a full recorder queue: times / s | %lld / %.2f |\n",
                static_cast<long long>(r.full_waits), r.full_wait_s);
    std::printf("| recorder close: indexes + WAL (s) / file (MiB) | %.1f / %.0f |\n", r.close_s,
                static_cast<double>(r.file_bytes) / 1048576.0);
    std::printf("| resident blocks in AttachedState at the end (publishers hold <= %zu each) / "
                "cleared after a loss | %lld / %lld |\n",
                o.resident, static_cast<long long>(r.resident_blocks),
                static_cast<long long>(r.loss_clears));
    std::printf("| subscriber RSS MiB: first / middle / last / max | %.1f (%.0f s) / %.1f (%.0f s) "
                "/ %.1f (%.0f s) / %.1f |\n",
                mib(first.kib), first.t, mib(middle.kib), middle.t, mib(last.kib), last.t,
                mib(max_rss));
    std::printf("\nRSS samples (s: MiB):");
    for (const RssSample& s : r.rss) {
        std::printf(" %.0f:%.1f", s.t, mib(s.kib));
    }
    std::printf("\n");
}

void print_json(const Options& o, const Result& r) {
    nlohmann::json rss = nlohmann::json::array();
    for (const RssSample& s : r.rss) {
        rss.push_back({{"t_s", s.t}, {"rss_kib", s.kib}});
    }
    const nlohmann::json j{
        {"publishers", o.publishers},
        {"target_rate", o.rate},
        {"duration_s", o.duration_s},
        {"recording", !o.no_record},
        {"publish_s", r.publish_s},
        {"sent_messages", r.sent_messages},
        {"sent_events", r.sent_events},
        {"sent_rows", r.sent_rows},
        {"send_failures", r.send_failures},
        {"received_messages", r.messages},
        {"received_events", r.events},
        {"gaps", r.gaps},
        {"lost", r.lost},
        {"decode_errors", r.decode_errors},
        {"rows_emitted", r.rows_emitted},
        {"rows_recorded", r.rows_recorded},
        {"achieved_rate", r.publish_s > 0 ? static_cast<double>(r.events) / r.publish_s : 0},
        {"drain_s", r.drain_s},
        {"receive_s", r.receive_s},
        {"kept_up_rate", r.receive_s > 0 ? static_cast<double>(r.events) / r.receive_s : 0},
        {"attach_thread_cpu_s", r.loop_cpu_s},
        {"subscriber_cpu_s", r.process_cpu_s},
        {"publisher_cpu_s", r.publisher_cpu_s},
        {"recorder_max_backlog", r.max_backlog},
        {"recorder_max_queued", r.max_queued},
        {"recorder_full_waits", r.full_waits},
        {"recorder_full_wait_s", r.full_wait_s},
        {"recorder_dropped_rows", r.dropped_rows},
        {"recorder_close_s", r.close_s},
        {"file_bytes", r.file_bytes},
        {"resident_blocks", r.resident_blocks},
        {"loss_clears", r.loss_clears},
        {"rss", rss}};
    std::printf("%s\n", j.dump(2).c_str());
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app("kvscope attach throughput: N publishers into one AttachSession");
    app.add_option("--publishers", o.publishers, "publishers (one process, one socket each)")
        ->check(CLI::Range(1, 64));
    app.add_option("--rate", o.rate, "KV events a second over all publishers")
        ->check(CLI::PositiveNumber);
    app.add_option("--duration", o.duration_s, "seconds of publishing")->check(CLI::PositiveNumber);
    app.add_option("--record", o.record, "the recording to write (replaced)");
    app.add_flag("--no-record", o.no_record, "decode and keep state, record nothing");
    app.add_flag("--keep", o.keep, "keep the recording afterwards");
    app.add_flag("--json", o.json, "JSON instead of a table");
    app.add_option("--rss-interval", o.rss_interval_s, "seconds between RSS samples")
        ->check(CLI::PositiveNumber);
    app.add_option("--send-hwm", o.send_hwm, "publishers' send high-water mark (messages)");
    app.add_option("--receive-hwm", o.receive_hwm,
                   "subscriber's receive high-water mark (0: kvscope's default)");
    app.add_option("--resident", o.resident, "blocks each publisher keeps resident (LRU)");
    app.add_option("--seed", o.seed, "workload seed");
    app.add_flag("--publish", o.publish)->group(""); // the child
    CLI11_PARSE(app, argc, argv);
    if (o.publish) {
        return publish_main(o);
    }
    std::signal(SIGPIPE, SIG_IGN);
    try {
        const Result r = run(o);
        if (o.json) {
            print_json(o, r);
        } else {
            print_table(o, r);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-bench-attach: %s\n", e.what());
        return 1;
    }
    return 0;
}
