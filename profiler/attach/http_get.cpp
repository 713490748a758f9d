#include "profiler/attach/http_get.h"

#include <curl/curl.h>
#include <mutex>

namespace kvscope::attach {
namespace {

struct Transfer {
    std::string* body;
    std::size_t max_body;
    bool too_large = false;
    const std::atomic<bool>* cancel;
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto* transfer = static_cast<Transfer*>(user);
    const std::size_t bytes = size * count;
    if (transfer->body->size() + bytes > transfer->max_body) {
        transfer->too_large = true;
        return 0; // curl stops with CURLE_WRITE_ERROR
    }
    transfer->body->append(data, bytes);
    return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    const auto* transfer = static_cast<const Transfer*>(user);
    return transfer->cancel != nullptr && transfer->cancel->load() ? 1 : 0;
}

void global_init() {
    // curl_global_init is not thread-safe before 7.84 and must run once.
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

} // namespace

HttpClient::HttpClient(HttpGetOptions options, const std::atomic<bool>* cancel)
    : options_(options)
    , cancel_(cancel)
    , curl_(nullptr) {
    global_init();
    curl_ = curl_easy_init();
}

HttpClient::~HttpClient() {
    if (curl_ != nullptr) {
        curl_easy_cleanup(static_cast<CURL*>(curl_));
    }
}

HttpResponse HttpClient::get(const std::string& url) {
    // Asks for the classic text format: prometheus_client answers OpenMetrics
    // only to a client that asks for it.
    return perform(url, false, "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1");
}

HttpResponse HttpClient::post(const std::string& url) {
    return perform(url, true, "Accept: application/json");
}

HttpResponse HttpClient::perform(const std::string& url, bool post, const char* accept) {
    HttpResponse response;
    CURL* curl = static_cast<CURL*>(curl_);
    if (curl == nullptr) {
        response.error = "libcurl could not start a transfer";
        return response;
    }
    curl_easy_reset(curl); // keeps the connection cache, drops the last options
    Transfer transfer{&response.body, options_.max_body, false, cancel_};
    char reason[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); // timeouts without SIGALRM: we run on threads
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.total_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, reason);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, ""); // gzip if the server offers it
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "kvscope");
    if (post) {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
    }
    curl_slist* headers = curl_slist_append(nullptr, accept);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

    const CURLcode code = curl_easy_perform(curl);
    // The handle outlives this call's header list and error buffer.
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
    curl_slist_free_all(headers);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    if (code != CURLE_OK) {
        if (transfer.too_large) {
            response.error =
                "the reply is larger than " + std::to_string(options_.max_body) + " bytes";
        } else if (code == CURLE_ABORTED_BY_CALLBACK) {
            response.error = "cancelled";
        } else {
            response.error = reason[0] != '\0' ? reason : curl_easy_strerror(code);
        }
        response.body.clear();
        return response;
    }
    if (response.status < 200 || response.status >= 300) {
        response.error = "HTTP " + std::to_string(response.status);
        response.body.clear();
    }
    return response;
}

} // namespace kvscope::attach
