#include "train/dist/rendezvous_wire.h"

#include <cstring>
#include <iomanip>

#include "core/error.h"

namespace ft::wire {

const char* type_name(uint32_t t) {
  switch (t) {
    case kHello: return "hello";
    case kStart: return "start";
    case kRefuse: return "refuse";
    case kAbort: return "abort";
    case kGoodbye: return "goodbye";
    case kBarrier: return "barrier";
    case kBroadcast: return "broadcast";
    case kGather: return "all_gather";
    case kReduceF32: return "all_reduce_sum(float)";
    case kReduceF64: return "all_reduce_sum(double)";
    default: return "unknown";
  }
}

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

Header parse_header(const uint8_t* p) { return {get_u32(p), get_u32(p + 4), get_u64(p + 8), get_u64(p + 16)}; }

std::vector<uint8_t> make_frame(uint32_t type, uint64_t seq, const void* data, size_t n) {
  std::vector<uint8_t> f;
  f.reserve(kHeaderBytes + n);
  put_u32(f, type);
  put_u32(f, 0);
  put_u64(f, seq);
  put_u64(f, n);
  const auto* d = static_cast<const uint8_t*>(data);
  f.insert(f.end(), d, d + n);
  return f;
}

std::string string_of(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string hello_payload(const DistEnv& env) {
  std::vector<uint8_t> b(kMagic, kMagic + kMagicBytes);
  put_u32(b, kVersion);
  put_u32(b, static_cast<uint32_t>(env.rank));
  put_u32(b, static_cast<uint32_t>(env.world_size));
  put_u32(b, static_cast<uint32_t>(env.job_id.size()));
  b.insert(b.end(), env.job_id.begin(), env.job_id.end());
  return string_of(b);
}

bool parse_hello(const std::vector<uint8_t>& p, Hello* h, std::string* why) {
  if (p.size() < kMagicBytes || std::memcmp(p.data(), kMagic, kMagicBytes) != 0) {
    *why = "wrong magic: not the flashtrain rendezvous protocol";
    return false;
  }
  if (p.size() < kMagicBytes + 16) {
    *why = str("hello of ", p.size(), " bytes is too short");
    return false;
  }
  const uint8_t* q = p.data() + kMagicBytes;
  const uint32_t version = get_u32(q);
  if (version != kVersion) {
    *why = str("protocol version ", version, ", this rank speaks ", kVersion);
    return false;
  }
  h->rank = static_cast<int32_t>(get_u32(q + 4));
  h->world = static_cast<int32_t>(get_u32(q + 8));
  const uint32_t job_len = get_u32(q + 12);
  if (job_len > kMaxJobIdBytes || p.size() != kMagicBytes + 16 + job_len) {
    *why = str("hello of ", p.size(), " bytes does not match its job id length ", job_len);
    return false;
  }
  h->job.assign(reinterpret_cast<const char*>(q + 16), job_len);
  return true;
}

std::string preview(const std::vector<uint8_t>& b) {
  std::string s;
  for (size_t i = 0; i < b.size() && i < 16; ++i) {
    const unsigned char c = b[i];
    s += (c >= 32 && c < 127 && c != '\\') ? std::string(1, static_cast<char>(c)) : str("\\x", std::hex, std::setw(2), std::setfill('0'), int(c));
  }
  return s;
}

}  // namespace ft::wire
