// The TCP rendezvous and the star collectives (contract in rendezvous.h; wire format in
// rendezvous_wire.h; sockets with deadlines in socket_io.h).
//
// Sharing the sockets with the watchdog: a collective holds io_mu for its whole duration, so the
// byte stream is at a frame boundary whenever io_mu is free. The watchdog polls for hang-up only
// (POLLRDHUP, plus the POLLHUP/POLLERR poll always reports) without the lock - poll consumes
// nothing - and, when a socket hung up, takes io_mu and peeks (MSG_PEEK) at the buffered frames: a
// goodbye among them means a clean exit; an abort carries rank 0's reason; anything else is a
// failure. The watchdog never reads, so it cannot steal a collective's bytes.
#include "train/dist/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "train/dist/rendezvous_wire.h"
#include "train/dist/socket_io.h"

namespace ft {

namespace {

using namespace wire;  // NOLINT: this file is the protocol's one user
using namespace net;   // NOLINT

std::string seconds_text(double s) { return str(std::setprecision(3), s, " s"); }

struct Peer {
  int fd = -1;
  int rank = -1;
  std::string addr;  // host:port as this side sees it
};

}  // namespace

struct Rendezvous::Impl {
  DistEnv env;
  double timeout_s = 300;
  std::ostream* log = nullptr;
  // Rank 0: peers[r] for r = 1..world-1 (peers[0] unused). Others: peers[0] is rank 0.
  std::vector<Peer> peers;

  std::mutex io_mu;       // held by a collective, by shutdown, and by the watchdog while it inspects
  uint64_t seq = 0;       // collectives called so far
  bool closed = false;    // shutdown() ran
  std::string failure;    // set when a collective failed: the streams are out of step from then on

  std::thread watchdog;
  std::atomic<bool> stop{false};
  int wake[2] = {-1, -1};  // a pipe that wakes the watchdog's poll on shutdown

  std::string who() const { return str("rendezvous (rank ", env.rank, " of ", env.world_size, ", job ", env.job_id, ")"); }
  std::string peer_name(const Peer& p) const { return str("rank ", p.rank, " (", p.addr, ")"); }
  Deadline deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  }

  void refuse_log(const std::string& addr, const std::string& why) {
    std::ostringstream line;
    line << "flashtrain: rendezvous: refused " << addr << ": " << why << "\n";
    *log << line.str() << std::flush;
  }

  // ---- frame I/O with the errors the contract asks for ----

  [[noreturn]] void io_fail(const Peer& p, Io io, int err, const std::string& what) {
    if (io == Io::kTimeout)
      throw Error(str(who(), ": ", what, ": ", peer_name(p), " did not answer within ", seconds_text(timeout_s)));
    if (io == Io::kClosed) throw Error(str(who(), ": ", what, ": ", peer_name(p), " hung up"));
    throw Error(str(who(), ": ", what, ": socket to ", peer_name(p), " failed: ", std::strerror(err)));
  }

  void send_frame(const Peer& p, uint32_t type, uint64_t s, const void* data, size_t n, Deadline dl, const std::string& what) {
    const auto f = make_frame(type, s, data, n);
    int err = 0;
    const Io io = send_all(p.fd, f.data(), f.size(), dl, &err);
    if (io != Io::kOk) io_fail(p, io, err, what);
  }

  Frame recv_frame(const Peer& p, Deadline dl, const std::string& what) {
    uint8_t hb[kHeaderBytes];
    int err = 0;
    Io io = recv_all(p.fd, hb, kHeaderBytes, dl, &err);
    if (io != Io::kOk) io_fail(p, io, err, what);
    Frame f;
    f.h = parse_header(hb);
    if (f.h.zero != 0 || f.h.length > kMaxFrameBytes)
      throw Error(str(who(), ": ", what, ": ", peer_name(p), " sent a malformed frame (type ", f.h.type, ", length ", f.h.length, ")"));
    f.payload.resize(static_cast<size_t>(f.h.length));
    io = recv_all(p.fd, f.payload.data(), f.payload.size(), dl, &err);
    if (io != Io::kOk) io_fail(p, io, err, what);
    return f;
  }

  // Receives the frame of collective (type, s), throwing on anything else.
  std::vector<uint8_t> recv_expect(const Peer& p, uint32_t type, uint64_t s, Deadline dl, const std::string& what) {
    Frame f = recv_frame(p, dl, what);
    if (f.h.type == kAbort) throw Error(str(who(), ": ", what, ": rank 0 aborted the job: ", string_of(f.payload)));
    if (f.h.type == kGoodbye) throw Error(str(who(), ": ", what, ": ", peer_name(p), " has shut down"));
    if (f.h.type != type || f.h.seq != s)
      throw Error(str(who(), ": collective mismatch: this rank called ", type_name(type), " #", s, ", ", peer_name(p), " sent ",
                      type_name(f.h.type), " #", f.h.seq));
    return std::move(f.payload);
  }

  // Rank 0: best-effort abort notice to every peer but `except`, so they fail with the reason.
  void abort_peers(const std::string& why, int except) {
    const Deadline dl = Clock::now() + std::chrono::milliseconds(200);
    for (size_t r = 1; r < peers.size(); ++r) {
      if (static_cast<int>(r) == except || peers[r].fd < 0) continue;
      const auto f = make_frame(kAbort, seq, why.data(), why.size());
      int err = 0;
      send_all(peers[r].fd, f.data(), f.size(), dl, &err);
    }
  }

  // ---- the star: peers send their part to rank 0, rank 0 combines and sends the result back ----

  using Combine = std::function<std::vector<uint8_t>(std::vector<std::vector<uint8_t>>& parts)>;

  std::vector<uint8_t> star(uint32_t type, const std::vector<uint8_t>& mine, bool peers_send, const Combine& combine) {
    std::lock_guard<std::mutex> lock(io_mu);
    const std::string what = str(type_name(type), " #", seq);
    if (closed) throw Error(str(who(), ": ", what, " after shutdown()"));
    if (!failure.empty()) throw Error(str(who(), ": ", what, ": an earlier collective failed: ", failure));
    const uint64_t s = seq++;
    if (env.world_size == 1) {
      std::vector<std::vector<uint8_t>> parts{mine};
      return combine(parts);
    }
    const Deadline dl = deadline();
    try {
      if (env.rank == 0) {
        std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(env.world_size));
        parts[0] = mine;
        if (peers_send) {
          for (size_t r = 1; r < peers.size(); ++r) parts[r] = recv_expect(peers[r], type, s, dl, what);
        }
        std::vector<uint8_t> result = combine(parts);
        for (size_t r = 1; r < peers.size(); ++r) {
          send_frame(peers[r], type, s, result.data(), result.size(), dl, what);
        }
        return result;
      }
      if (peers_send) send_frame(peers[0], type, s, mine.data(), mine.size(), dl, what);
      return recv_expect(peers[0], type, s, dl, what);
    } catch (const Error& e) {
      failure = e.what();
      // Everyone hears why, the culprit included (after a mismatch it is still listening).
      if (env.rank == 0) abort_peers(failure, -1);
      throw;
    }
  }

  // ---- the watchdog ----

  enum class Health { kAlive, kClean, kFailed };

  // Called with io_mu held, on a socket that reported hang-up or error: the stream is at a frame
  // boundary, so the buffered frames can be read (peeked) from the start.
  Health inspect(const Peer& p, std::string* why) {
    *why = p.rank == 0 ? str("rank 0 disconnected") : str(peer_name(p), " disconnected");
    if (!failure.empty()) return Health::kFailed;  // a failed collective may have left the stream mid-frame
    int avail = 0;
    std::vector<uint8_t> buf;
    ssize_t n = 0;
    if (::ioctl(p.fd, FIONREAD, &avail) == 0 && avail > 0) {
      buf.resize(static_cast<size_t>(avail));
      n = ::recv(p.fd, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
    }
    size_t off = 0;
    while (n > 0 && off + kHeaderBytes <= static_cast<size_t>(n)) {
      const Header h = parse_header(buf.data() + off);
      if (h.type == kGoodbye) return Health::kClean;
      if (h.length > static_cast<size_t>(n) - off - kHeaderBytes) break;
      if (h.type == kAbort) {
        *why = str("rank 0 aborted the job: ", std::string(buf.begin() + static_cast<long>(off + kHeaderBytes),
                                                           buf.begin() + static_cast<long>(off + kHeaderBytes + h.length)));
        return Health::kFailed;
      }
      off += kHeaderBytes + static_cast<size_t>(h.length);
    }
    return Health::kFailed;
  }

  void watch(const std::function<void(const std::string&)>& on_failure) {
    std::vector<const Peer*> watched;
    for (const Peer& p : peers)
      if (p.fd >= 0) watched.push_back(&p);
    while (!stop.load() && !watched.empty()) {
      std::vector<pollfd> pf;
      pf.push_back({wake[0], POLLIN, 0});
      for (const Peer* p : watched) pf.push_back({p->fd, POLLRDHUP, 0});
      const int r = ::poll(pf.data(), pf.size(), -1);
      if (r < 0 && errno != EINTR) return;
      if (stop.load()) return;
      for (size_t i = pf.size(); i-- > 1;) {
        if (!(pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
        std::string why;
        Health h;
        {
          std::lock_guard<std::mutex> lock(io_mu);
          if (stop.load() || closed) return;
          h = inspect(*watched[i - 1], &why);
          if (h == Health::kFailed && env.rank == 0) abort_peers(why, watched[i - 1]->rank);
        }
        if (h == Health::kFailed) {
          try {
            on_failure(why);
          } catch (...) {  // an exception cannot leave this thread; the callback had its say
          }
          return;
        }
        watched.erase(watched.begin() + static_cast<long>(i - 1));  // left cleanly
      }
    }
  }

  // ---- the rendezvous itself ----

  void join_as_rank0();
  void join_as_peer();
};

namespace {

// A connection on its way through the hello.
struct Pending {
  int fd;
  std::string addr;
  Deadline hello_deadline;
  std::vector<uint8_t> buf;  // header, then header + payload
};

}  // namespace

void Rendezvous::Impl::join_as_rank0() {
  std::string err;
  const int lfd = listen_on(env.master_port, &err);
  if (lfd < 0) throw Error(str(who(), ": cannot listen on port ", env.master_port, ": ", err));
  // A real rank sends its hello right after connecting; a peer that has not within this time
  // (a port scanner, a stuck client) is refused so it cannot hold the rendezvous up.
  const double hello_s = std::clamp(timeout_s / 4, 0.05, 5.0);
  const Deadline dl = deadline();
  peers.assign(static_cast<size_t>(env.world_size), Peer{});
  int joined = 1;
  std::vector<Pending> pending;

  auto refuse = [&](Pending& c, const std::string& why, bool tell) {
    if (tell) {
      int e = 0;
      const auto f = make_frame(kRefuse, 0, why.data(), why.size());
      send_all(c.fd, f.data(), f.size(), Clock::now() + std::chrono::milliseconds(100), &e);
    }
    refuse_log(c.addr, why);
    ::close(c.fd);
    c.fd = -1;
  };

  while (joined < env.world_size && Clock::now() < dl) {
    std::vector<pollfd> pf;
    pf.push_back({lfd, POLLIN, 0});
    Deadline wake_at = dl;
    for (const auto& c : pending) {
      pf.push_back({c.fd, POLLIN, 0});
      wake_at = std::min(wake_at, c.hello_deadline);
    }
    const int r = ::poll(pf.data(), pf.size(), ms_until(wake_at) + 1);
    if (r < 0 && errno != EINTR) {
      ::close(lfd);
      throw Error(str(who(), ": poll failed: ", std::strerror(errno)));
    }
    // Read what the pending connections sent (before accepting, so indices match pf).
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& c = pending[i];
      if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const size_t want = c.buf.size() < kHeaderBytes ? kHeaderBytes : kHeaderBytes + get_u64(c.buf.data() + 16);
      const size_t have = c.buf.size();
      c.buf.resize(want);
      const ssize_t k = ::recv(c.fd, c.buf.data() + have, want - have, 0);
      if (k <= 0) {
        c.buf.resize(have);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        refuse(c, have == 0 ? "closed without a hello" : str("closed after ", have, " bytes of its hello (", preview(c.buf), ")"), false);
        continue;
      }
      c.buf.resize(have + static_cast<size_t>(k));
      if (c.buf.size() == kHeaderBytes) {
        const Header h = parse_header(c.buf.data());
        if (h.type != kHello || h.zero != 0 || h.seq != 0 || h.length > kMaxHelloBytes) {
          refuse(c, str("not the flashtrain rendezvous protocol (first bytes \"", preview(c.buf), "\")"), false);
          continue;
        }
      }
      if (c.buf.size() < kHeaderBytes || c.buf.size() < kHeaderBytes + get_u64(c.buf.data() + 16)) continue;
      // A complete hello.
      const std::vector<uint8_t> payload(c.buf.begin() + kHeaderBytes, c.buf.end());
      Hello h;
      std::string why;
      if (!parse_hello(payload, &h, &why)) {
        refuse(c, why, false);
        continue;
      }
      if (h.job != env.job_id) {
        refuse(c, str("job id '", h.job, "' is not this job's '", env.job_id, "'"), true);
      } else if (h.world != env.world_size) {
        refuse(c, str("rank ", h.rank, " says world size ", h.world, ", this job has ", env.world_size), true);
      } else if (h.rank < 1 || h.rank >= env.world_size) {
        refuse(c, str("impossible rank ", h.rank, " for world size ", env.world_size, h.rank == 0 ? " (rank 0 is this process)" : ""), true);
      } else if (peers[static_cast<size_t>(h.rank)].fd >= 0) {
        refuse(c, str("rank ", h.rank, " has already joined (from ", peers[static_cast<size_t>(h.rank)].addr, ")"), true);
      } else {
        peers[static_cast<size_t>(h.rank)] = Peer{c.fd, h.rank, c.addr};
        c.fd = -1;
        ++joined;
      }
    }
    const Deadline now = Clock::now();
    for (auto& c : pending) {
      if (c.fd >= 0 && now >= c.hello_deadline)
        refuse(c, str("no complete hello within ", seconds_text(hello_s), " (", c.buf.size(), " bytes",
                      c.buf.empty() ? "" : str(": \"", preview(c.buf), "\""), ")"), false);
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(), [](const Pending& c) { return c.fd < 0; }), pending.end());
    // New connections.
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      const int fd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
      if (fd < 0) break;
      tune_socket(fd);
      pending.push_back({fd, sockaddr_text(reinterpret_cast<sockaddr*>(&ss)),
                         Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(hello_s)), {}});
    }
  }
  ::close(lfd);
  for (auto& c : pending) refuse(c, "the rendezvous is over", false);

  if (joined < env.world_size) {
    std::string missing, present = "0";
    int n_missing = 0;
    for (int r = 1; r < env.world_size; ++r) {
      if (peers[static_cast<size_t>(r)].fd < 0) {
        missing += str(n_missing++ ? ", " : "", r);
      } else {
        present += str(", ", r);
      }
    }
    const std::string msg = str(who(), ": timed out after ", seconds_text(timeout_s), " on port ", env.master_port, ": rank",
                                n_missing > 1 ? "s " : " ", missing, " of ", env.world_size, " never arrived (joined: ", present, ")");
    abort_peers(msg, -1);
    for (auto& p : peers)
      if (p.fd >= 0) ::close(p.fd);
    peers.clear();
    throw Error(msg);
  }
  const Deadline start_dl = deadline();
  for (size_t r = 1; r < peers.size(); ++r) {
    try {
      send_frame(peers[r], kStart, 0, nullptr, 0, start_dl, "start");
    } catch (...) {
      for (auto& p : peers)
        if (p.fd >= 0) ::close(p.fd);
      peers.clear();
      throw;
    }
  }
}

void Rendezvous::Impl::join_as_peer() {
  const Deadline dl = deadline();
  const std::string where = str(env.master_addr, ":", env.master_port);
  std::string last_error = "no attempt";
  const std::string hello = hello_payload(env);
  while (Clock::now() < dl) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int gai = ::getaddrinfo(env.master_addr.c_str(), std::to_string(env.master_port).c_str(), &hints, &res);
    if (gai != 0) {
      last_error = ::gai_strerror(gai);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_until(dl))));
      continue;
    }
    int fd = -1;
    for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        last_error = std::strerror(errno);
        continue;
      }
      tune_socket(fd);
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd pf{fd, POLLOUT, 0};
        rc = ::poll(&pf, 1, std::min(1000, ms_until(dl))) == 1 ? 0 : -1;
        int so = ETIMEDOUT;
        socklen_t len = sizeof(so);
        if (rc == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len);
        if (so != 0) {
          rc = -1;
          errno = so;
        }
      }
      if (rc != 0) {
        last_error = std::strerror(errno);
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(res);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, ms_until(dl))));
      continue;
    }
    // Connected: hello, then wait for rank 0's start (or its refusal or abort).
    Peer root{fd, 0, where};
    peers.assign(1, root);
    try {
      send_frame(root, kHello, 0, hello.data(), hello.size(), dl, "hello");
      // Rank 0 gives its verdict at its own deadline, which is about ours: a little grace lets its
      // message (which ranks never arrived) win over our plain timeout.
      const Deadline verdict_dl = dl + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::min(timeout_s * 0.25, 5.0)));
      Frame f;
      uint8_t hb[kHeaderBytes];
      int e = 0;
      const Io io = recv_all(fd, hb, kHeaderBytes, verdict_dl, &e);
      if (io == Io::kTimeout)
        throw Error(str(who(), ": rank 0 at ", where, " accepted the connection but the rendezvous did not complete within ",
                        seconds_text(timeout_s)));
      if (io != Io::kOk) throw Error(str(who(), ": rank 0 at ", where, " closed the connection during the rendezvous"));
      f.h = parse_header(hb);
      if (f.h.length > kMaxHelloBytes + kMaxJobIdBytes || (f.h.type != kStart && f.h.type != kRefuse && f.h.type != kAbort))
        throw Error(str(who(), ": ", where, " does not speak the flashtrain rendezvous protocol"));
      f.payload.resize(static_cast<size_t>(f.h.length));
      if (recv_all(fd, f.payload.data(), f.payload.size(), verdict_dl, &e) != Io::kOk)
        throw Error(str(who(), ": rank 0 at ", where, " closed the connection during the rendezvous"));
      if (f.h.type == kRefuse) throw Error(str(who(), ": rank 0 at ", where, " refused this rank: ", string_of(f.payload)));
      if (f.h.type == kAbort) throw Error(str(who(), ": rendezvous failed, rank 0 reports: ", string_of(f.payload)));
      return;
    } catch (...) {
      ::close(fd);
      peers.clear();
      throw;
    }
  }
  throw Error(str(who(), ": rank 0 at ", where, " was unreachable for ", seconds_text(timeout_s), " (", last_error, ")"));
}

Rendezvous::Rendezvous(const DistEnv& env, double timeout_s, std::ostream* log) : impl_(std::make_unique<Impl>()) {
  FT_CHECK_ARG(timeout_s > 0, "rendezvous: timeout ", timeout_s, " s must be > 0");
  FT_CHECK_ARG(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size, "rendezvous: rank ", env.rank,
               " is out of range for world size ", env.world_size);
  FT_CHECK_ARG(env.job_id.size() <= kMaxJobIdBytes, "rendezvous: job id of ", env.job_id.size(), " bytes is longer than ",
               kMaxJobIdBytes);
  impl_->env = env;
  impl_->timeout_s = timeout_s;
  impl_->log = log ? log : &std::cerr;
  if (env.world_size == 1) return;
  if (env.rank == 0) {
    impl_->join_as_rank0();
  } else {
    impl_->join_as_peer();
  }
}

Rendezvous::~Rendezvous() { shutdown(); }

int Rendezvous::rank() const { return impl_->env.rank; }
int Rendezvous::world_size() const { return impl_->env.world_size; }
double Rendezvous::timeout_s() const { return impl_->timeout_s; }

std::vector<uint8_t> Rendezvous::broadcast(const std::vector<uint8_t>& data_from_rank0) {
  return impl_->star(kBroadcast, data_from_rank0, false, [](std::vector<std::vector<uint8_t>>& parts) { return parts[0]; });
}

std::vector<std::vector<uint8_t>> Rendezvous::all_gather(const std::vector<uint8_t>& mine) {
  const int world = impl_->env.world_size;
  // Result layout: u64 length per rank, then the bytes in rank order.
  const std::vector<uint8_t> packed = impl_->star(kGather, mine, true, [](std::vector<std::vector<uint8_t>>& parts) {
    std::vector<uint8_t> out;
    for (const auto& p : parts) put_u64(out, p.size());
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  });
  std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(world));
  const size_t head = 8 * static_cast<size_t>(world);
  FT_CHECK_ARG(packed.size() >= head, impl_->who(), ": all_gather result of ", packed.size(), " bytes is too short");
  size_t off = head;
  for (int r = 0; r < world; ++r) {
    const uint64_t n = get_u64(packed.data() + 8 * r);
    FT_CHECK_ARG(n <= packed.size() - off, impl_->who(), ": all_gather result is malformed (rank ", r, " length ", n, ")");
    parts[static_cast<size_t>(r)].assign(packed.begin() + static_cast<long>(off), packed.begin() + static_cast<long>(off + n));
    off += n;
  }
  return parts;
}

namespace {

template <class T>
void all_reduce_sum_impl(Rendezvous::Impl& impl, uint32_t type, T* data, size_t n) {
  std::vector<uint8_t> mine(n * sizeof(T));
  if (n) std::memcpy(mine.data(), data, mine.size());
  const std::string who = impl.who();
  const std::vector<uint8_t> sum = impl.star(type, mine, true, [&](std::vector<std::vector<uint8_t>>& parts) {
    for (size_t r = 1; r < parts.size(); ++r) {
      if (parts[r].size() != mine.size())
        throw Error(str(who, ": ", type_name(type), ": rank ", r, " sent ", parts[r].size() / sizeof(T), " values, rank 0 has ", n));
    }
    std::vector<T> acc(n);
    if (n) std::memcpy(acc.data(), parts[0].data(), mine.size());
    for (size_t r = 1; r < parts.size(); ++r) {
      const T* v = reinterpret_cast<const T*>(parts[r].data());
      for (size_t i = 0; i < n; ++i) acc[i] += v[i];
    }
    std::vector<uint8_t> out(mine.size());
    if (n) std::memcpy(out.data(), acc.data(), out.size());
    return out;
  });
  if (sum.size() != mine.size())
    throw Error(str(who, ": ", type_name(type), ": rank 0 returned ", sum.size() / sizeof(T), " values, this rank has ", n));
  if (n) std::memcpy(data, sum.data(), sum.size());
}

}  // namespace

void Rendezvous::all_reduce_sum(float* data, size_t n) { all_reduce_sum_impl(*impl_, kReduceF32, data, n); }
void Rendezvous::all_reduce_sum(double* data, size_t n) { all_reduce_sum_impl(*impl_, kReduceF64, data, n); }

void Rendezvous::barrier() {
  impl_->star(kBarrier, {}, true, [](std::vector<std::vector<uint8_t>>&) { return std::vector<uint8_t>{}; });
}

void Rendezvous::start_watchdog(std::function<void(const std::string& why)> on_failure) {
  Impl& m = *impl_;
  FT_CHECK_ARG(on_failure, m.who(), ": start_watchdog needs a callback");
  std::lock_guard<std::mutex> lock(m.io_mu);
  if (m.closed) throw Error(str(m.who(), ": start_watchdog after shutdown()"));
  if (m.watchdog.joinable() || m.wake[0] >= 0) throw Error(str(m.who(), ": the watchdog is already running"));
  if (m.env.world_size == 1) return;
  if (::pipe2(m.wake, O_CLOEXEC) != 0) throw Error(str(m.who(), ": pipe: ", std::strerror(errno)));
  m.watchdog = std::thread([&m, cb = std::move(on_failure)] { m.watch(cb); });
}

void Rendezvous::shutdown() {
  Impl& m = *impl_;
  m.stop.store(true);
  if (m.wake[1] >= 0) {
    const char c = 1;
    [[maybe_unused]] const ssize_t k = ::write(m.wake[1], &c, 1);
  }
  if (m.watchdog.joinable()) {
    // From inside on_failure (against the contract, but survivable): the thread returns right
    // after the callback, so let it go instead of joining itself.
    if (m.watchdog.get_id() == std::this_thread::get_id()) {
      m.watchdog.detach();
    } else {
      m.watchdog.join();
    }
  }
  std::lock_guard<std::mutex> lock(m.io_mu);
  if (m.closed) return;
  m.closed = true;
  // Goodbye, half-close, read what has already arrived, close. Waiting for the peers' FIN is not
  // needed: bytes left unread here (which turn our FIN into a RST) can only come from a peer that
  // is itself shutting down, or from one that ran a collective we did not (an error anyway), and a
  // RST reaches a peer's watchdog only after that peer stopped it.
  const Deadline dl = Clock::now() + std::chrono::milliseconds(200);  // for sending the goodbyes
  std::vector<int> open;
  for (const Peer& p : m.peers) {
    if (p.fd < 0) continue;
    const auto f = make_frame(kGoodbye, m.seq, nullptr, 0);
    int err = 0;
    send_all(p.fd, f.data(), f.size(), dl, &err);
    ::shutdown(p.fd, SHUT_WR);
    open.push_back(p.fd);
  }
  std::vector<int> draining = open;
  while (!draining.empty()) {
    std::vector<pollfd> pf;
    for (int fd : draining) pf.push_back({fd, POLLIN, 0});
    if (::poll(pf.data(), pf.size(), 0) <= 0) break;
    for (size_t i = pf.size(); i-- > 0;) {
      if (!pf[i].revents) continue;
      uint8_t sink[4096];
      const ssize_t k = ::recv(pf[i].fd, sink, sizeof(sink), 0);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) draining.erase(draining.begin() + static_cast<long>(i));
    }
  }
  for (int fd : open) ::close(fd);
  for (Peer& p : m.peers) p.fd = -1;
  for (int& fd : m.wake) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

}  // namespace ft
