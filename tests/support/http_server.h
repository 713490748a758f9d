// A loopback HTTP/1.1 server for tests, on its own thread: serves fixed
// replies by path (a Prometheus page, a 404, bytes that are not HTTP), one
// request per connection. Enough for libcurl to GET or POST; nothing more.
#pragma once

#include <arpa/inet.h>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace kvscope::test {

class HttpServer {
public:
    struct Reply {
        int status = 200;
        std::string body;
        bool raw = false; // send `body` as the whole reply, no status line
    };

    HttpServer() {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof addr;
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(fd_, 16) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
            throw std::runtime_error("test HTTP server: cannot listen on loopback");
        }
        port_ = ntohs(addr.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~HttpServer() {
        stop_ = true;
        thread_.join();
        ::close(fd_);
    }
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(port_) + path;
    }
    void set(const std::string& path, Reply reply) {
        const std::lock_guard lock(mutex_);
        replies_[path] = std::move(reply);
    }
    // Replies served once each, in order, before `set`'s (a server that
    // drains a queue on every request, as TensorRT-LLM's /kv_cache_events).
    void push(const std::string& path, Reply reply) {
        const std::lock_guard lock(mutex_);
        queued_[path].push_back(std::move(reply));
    }
    int requests() const { return requests_; }
    std::string last_method() {
        const std::lock_guard lock(mutex_);
        return last_method_;
    }

    // A port nothing listens on (bound, then closed): connections are refused.
    static std::string refused_url() {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof addr;
        ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
        ::close(fd);
        return "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/metrics";
    }

private:
    void serve() {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 20) <= 0) {
                continue;
            }
            const int client = ::accept(fd_, nullptr, nullptr);
            if (client < 0) {
                continue;
            }
            std::string request;
            char buffer[4096];
            while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
                pollfd c{client, POLLIN, 0};
                if (::poll(&c, 1, 1000) <= 0) {
                    break;
                }
                const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
                if (n <= 0) {
                    break;
                }
                request.append(buffer, static_cast<std::size_t>(n));
            }
            ++requests_;
            const std::size_t start = request.find(' ') + 1;
            const std::string path =
                start == 0 ? "" : request.substr(start, request.find(' ', start) - start);
            Reply reply{404, "not found\n", false};
            {
                const std::lock_guard lock(mutex_);
                last_method_ = request.substr(0, request.find(' '));
                if (auto queued = queued_.find(path);
                    queued != queued_.end() && !queued->second.empty()) {
                    reply = std::move(queued->second.front());
                    queued->second.pop_front();
                } else if (const auto it = replies_.find(path); it != replies_.end()) {
                    reply = it->second;
                }
            }
            std::string out = reply.body;
            if (!reply.raw) {
                out = "HTTP/1.1 " + std::to_string(reply.status) +
                      (reply.status == 200 ? " OK" : " Error") +
                      "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                      "Content-Length: " +
                      std::to_string(reply.body.size()) + "\r\nConnection: close\r\n\r\n" +
                      reply.body;
            }
            std::size_t sent = 0;
            while (sent < out.size()) {
                const ssize_t n =
                    ::send(client, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
                if (n <= 0) {
                    break;
                }
                sent += static_cast<std::size_t>(n);
            }
            ::close(client);
        }
    }

    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> requests_{0};
    std::mutex mutex_;
    std::map<std::string, Reply> replies_;
    std::map<std::string, std::deque<Reply>> queued_;
    std::string last_method_;
    std::thread thread_;
};

} // namespace kvscope::test
