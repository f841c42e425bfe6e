// The rendezvous wire format (train/dist/rendezvous.h): frames and the hello. Pure byte work, no sockets.
//
// Every message is a frame: a 24-byte header {u32 type, u32 zero, u64 sequence, u64 payload
// length}, little-endian, then the payload. The hello's payload is the magic, the protocol
// version, rank, world size, job id length and job id. Collectives number themselves (sequence),
// so a rank that called a different collective, or one more, is caught instead of misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/dist/dist_env.h"

namespace ft::wire {

enum FrameType : uint32_t {
  kHello = 1,
  kStart = 2,    // rank 0 -> peer: every rank has joined
  kRefuse = 3,   // rank 0 -> peer: why its hello was refused
  kAbort = 4,    // rank 0 -> peer: the job failed, and why
  kGoodbye = 5,  // clean shutdown
  kBarrier = 10,
  kBroadcast = 11,
  kGather = 12,
  kReduceF32 = 13,
  kReduceF64 = 14,
};

constexpr size_t kHeaderBytes = 24;
constexpr char kMagic[] = "flashtrain-rendezvous";
constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxHelloBytes = 4096;
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 32;  // 4 GiB: the star collectives are for small data
constexpr size_t kMaxJobIdBytes = 1024;

// "barrier", "all_reduce_sum(float)", ...: how messages name a frame type.
const char* type_name(uint32_t type);

void put_u32(std::vector<uint8_t>& b, uint32_t v);
void put_u64(std::vector<uint8_t>& b, uint64_t v);
uint32_t get_u32(const uint8_t* p);
uint64_t get_u64(const uint8_t* p);

struct Header {
  uint32_t type = 0;
  uint32_t zero = 0;
  uint64_t seq = 0;
  uint64_t length = 0;
};

struct Frame {
  Header h;
  std::vector<uint8_t> payload;
};

// Reads kHeaderBytes at p.
Header parse_header(const uint8_t* p);
// Header and payload, ready to send.
std::vector<uint8_t> make_frame(uint32_t type, uint64_t seq, const void* data, size_t n);
std::string string_of(const std::vector<uint8_t>& b);

// The hello payload a rank of `env` sends.
std::string hello_payload(const DistEnv& env);

struct Hello {
  int rank = -1, world = -1;
  std::string job;
};

// Parses a hello payload; on failure false, with the reason to log in *why.
bool parse_hello(const std::vector<uint8_t>& p, Hello* h, std::string* why);

// The first 16 bytes for a log line: printable characters as they are, the rest as \xNN.
std::string preview(const std::vector<uint8_t>& b);

}  // namespace ft::wire
