// Non-blocking TCP with deadlines, for the rendezvous (train/dist/rendezvous.h): plain POSIX sockets.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ft::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Milliseconds left until d, for poll(): 0 when past.
int ms_until(Deadline d);

void set_nonblocking(int fd);
// TCP_NODELAY (small frames go out at once), keep-alive (a host that vanishes without a FIN shows
// up as a socket error in about a minute), non-blocking.
void tune_socket(int fd);

// "10.0.0.7:51234", "[fe80::1]:51234"; an IPv4 peer of a dual-stack listener without ::ffff:.
std::string sockaddr_text(const sockaddr* sa);

// A listening, non-blocking socket on all interfaces (dual-stack IPv6 where the host has it, else
// IPv4), SO_REUSEADDR; -1 with the reason in *err.
int listen_on(int port, std::string* err);

enum class Io { kOk, kTimeout, kClosed, kError };

// Sends all n bytes (MSG_NOSIGNAL) before the deadline; on kError, errno's value in *err.
Io send_all(int fd, const uint8_t* p, size_t n, Deadline dl, int* err);
// Receives exactly n bytes before the deadline; kClosed at end of stream or reset.
Io recv_all(int fd, uint8_t* p, size_t n, Deadline dl, int* err);

}  // namespace ft::net
