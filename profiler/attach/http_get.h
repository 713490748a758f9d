// Plain HTTP GETs and POSTs for polling /metrics and /kv_cache_events, on libcurl: Debian's
// well-kept client (libcurl4-openssl-dev), with connect and total timeouts, https for free, and
// every failure a message rather than an exception.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

namespace kvscope::attach {

struct HttpGetOptions {
    std::chrono::milliseconds connect_timeout{1000};
    std::chrono::milliseconds total_timeout{3000};
    std::size_t max_body = std::size_t{32} << 20; // an engine's /metrics is ~100 KiB
};

struct HttpResponse {
    long status = 0;   // the HTTP status; 0 when none came back
    std::string body;  // the body of a 2xx reply
    std::string error; // why it failed ("HTTP 404", curl's reason); empty on success
    bool ok() const { return error.empty(); }
};

// One handle per thread: keeps the connection alive between polls. Not
// thread-safe; construct and use it on the polling thread.
class HttpClient {
public:
    // `cancel`, when given, aborts a request in flight once it reads true.
    explicit HttpClient(HttpGetOptions options = {}, const std::atomic<bool>* cancel = nullptr);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // GET `url` (http:// or https://); never throws for anything the
    // network or the server does.
    HttpResponse get(const std::string& url);
    // POST with an empty body, asking for JSON (TensorRT-LLM's
    // /kv_cache_events answers a POST with the events since the last one).
    HttpResponse post(const std::string& url);

private:
    HttpResponse perform(const std::string& url, bool post, const char* accept);

    HttpGetOptions options_;
    const std::atomic<bool>* cancel_;
    void* curl_; // CURL*, kept out of the header
};

} // namespace kvscope::attach
