#include "train/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
#include "train/checkpoint/file_util.h"
#include "train/config/json.h"

namespace ft {

namespace {

// The reference implementation's limit; a larger header is a corrupt length field, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypes[] = {{DType::F32, "F32"}, {DType::BF16, "BF16"}, {DType::F16, "F16"},
                                 {DType::F64, "F64"}, {DType::I32, "I32"},   {DType::I64, "I64"},
                                 {DType::U16, "U16"}, {DType::U8, "U8"}};
// Valid in safetensors, but with no ft::DType to hold them.
const std::set<std::string> kUnsupportedDTypes = {"BOOL", "I8", "I16", "U32", "U64", "F8_E4M3", "F8_E5M2",
                                                  "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};

void put_u64_le(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

class ReadFd {
 public:
  explicit ReadFd(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(str(path, ": cannot open: ", errno_message()));
  }
  ~ReadFd() { ::close(fd_); }
  uint64_t size() const {
    struct stat st;
    if (::fstat(fd_, &st) != 0) throw Error(str(path_, ": cannot stat: ", errno_message()));
    if (!S_ISREG(st.st_mode)) throw Error(str(path_, ": not a regular file"));
    return static_cast<uint64_t>(st.st_size);
  }
  void read_at(void* dst, uint64_t bytes, uint64_t offset) const {
    char* p = static_cast<char*>(dst);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error(str(path_, ": read failed at byte ", offset, ": ", n == 0 ? "unexpected end of file" : errno_message()));
      p += n;
      bytes -= static_cast<uint64_t>(n);
      offset += static_cast<uint64_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

uint64_t as_offset(const Json& j, const std::string& path, const std::string& name, const char* what) {
  if (!j.is_integer() || (j.type() == Json::Type::Int && j.as_int64() < 0))
    throw Error(str(path, ": tensor '", name, "': ", what, " must be a non-negative integer, got ", j.dump()));
  return j.as_uint64();
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& j, uint64_t data_bytes) {
  if (!j.is_object()) throw Error(str(path, ": tensor '", name, "': expected an object, got ", j.dump()));
  for (const auto& m : j.members()) {
    if (m.first != "dtype" && m.first != "shape" && m.first != "data_offsets")
      throw Error(str(path, ": tensor '", name, "': unknown field \"", m.first, "\""));
  }
  const Json* dt = j.find("dtype");
  const Json* sh = j.find("shape");
  const Json* off = j.find("data_offsets");
  if (!dt || !sh || !off) throw Error(str(path, ": tensor '", name, "': needs dtype, shape and data_offsets"));

  Entry e;
  e.name = name;
  if (!dt->is_string()) throw Error(str(path, ": tensor '", name, "': dtype must be a string, got ", dt->dump()));
  const std::string& dname = dt->as_string();
  bool known = false;
  for (const auto& d : kDTypes) {
    if (dname == d.name) e.dtype = d.dtype, known = true;
  }
  if (!known) {
    if (kUnsupportedDTypes.count(dname)) throw Error(str(path, ": tensor '", name, "': dtype ", dname, " is not supported by flashtrain"));
    throw Error(str(path, ": tensor '", name, "': unknown dtype \"", dname, "\""));
  }

  if (!sh->is_array()) throw Error(str(path, ": tensor '", name, "': shape must be an array, got ", sh->dump()));
  uint64_t numel = 1;
  for (const auto& d : sh->items()) {
    const uint64_t v = as_offset(d, path, name, "each shape entry");
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v))
      throw Error(str(path, ": tensor '", name, "': shape ", sh->dump(), " overflows"));
    numel *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }

  if (!off->is_array() || off->size() != 2)
    throw Error(str(path, ": tensor '", name, "': data_offsets must be [begin, end], got ", off->dump()));
  e.begin = as_offset(off->items()[0], path, name, "data_offsets[0]");
  e.end = as_offset(off->items()[1], path, name, "data_offsets[1]");
  if (e.begin > e.end || e.end > data_bytes)
    throw Error(str(path, ": tensor '", name, "': data_offsets [", e.begin, ", ", e.end, ") are outside the data section of ",
                    data_bytes, " bytes"));
  const uint64_t item = dtype_size(e.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / item || numel * item != e.end - e.begin)
    throw Error(str(path, ": tensor '", name, "': shape ", sh->dump(), " of ", dname, " needs ", numel, " x ", item,
                    " bytes but data_offsets span ", e.end - e.begin));
  return e;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypes) {
    if (d.dtype == t) return d.name;
  }
  throw Error(str("[safetensors] no safetensors name for dtype ", t));
}

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors, const StringPairs& metadata) {
  FT_CHECK_ARG(host_is_little_endian(), path, ": safetensors needs a little-endian host");
  std::set<std::string> names;
  for (const auto& t : tensors) {
    FT_CHECK_ARG(!t.name.empty(), path, ": a tensor has an empty name");
    FT_CHECK_ARG(t.name != "__metadata__", path, ": '__metadata__' is reserved and cannot name a tensor");
    FT_CHECK_ARG(names.insert(t.name).second, path, ": duplicate tensor name '", t.name, "'");
    FT_CHECK_ARG(t.tensor.defined(), path, ": tensor '", t.name, "' is undefined");
  }

  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].tensor.itemsize() > tensors[b].tensor.itemsize();
  });

  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& kv : metadata) meta.set(kv.first, kv.second);
    header.set("__metadata__", std::move(meta));
  }
  uint64_t offset = 0;
  for (const size_t i : order) {
    const Tensor& t = tensors[i].tensor;
    Json shape = Json::array();
    for (const int64_t d : t.shape()) shape.push_back(d);
    const uint64_t bytes = t.nbytes();
    header.set(tensors[i].name, Json::object({{"dtype", safetensors_dtype_name(t.dtype())},
                                             {"shape", std::move(shape)},
                                             {"data_offsets", Json::array({offset, offset + bytes})}}));
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  AtomicFile f(path);
  unsigned char len[8];
  put_u64_le(len, text.size());
  f.write(len, 8);
  f.write(text);
  for (const size_t i : order) {
    const Tensor host = tensors[i].tensor.to(Device::cpu()).contiguous();
    if (host.nbytes() > 0) f.write(host.data_ptr(), host.nbytes());
  }
  f.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  FT_CHECK_ARG(host_is_little_endian(), path, ": safetensors needs a little-endian host");
  const ReadFd fd(path);
  const uint64_t file_bytes = fd.size();
  if (file_bytes < 8) throw Error(str(path, ": file is ", file_bytes, " bytes, too short for the 8-byte header length"));
  unsigned char len[8];
  fd.read_at(len, 8, 0);
  const uint64_t n = get_u64_le(len);
  if (n > file_bytes - 8) throw Error(str(path, ": header length ", n, " exceeds the ", file_bytes - 8, " bytes after the length field"));
  if (n > kMaxHeaderBytes) throw Error(str(path, ": header length ", n, " exceeds the 100 MB limit"));
  std::string text(n, '\0');
  fd.read_at(text.data(), n, 8);
  if (text.empty() || text[0] != '{') throw Error(str(path, ": header does not start with '{' (not a safetensors file?)"));
  const Json header = Json::parse(text, path + ": header");
  if (!header.is_object()) throw Error(str(path, ": header is not a JSON object"));

  const uint64_t data_start = 8 + n;
  const uint64_t data_bytes = file_bytes - data_start;
  SafetensorsFile out;
  out.path = path;
  std::vector<Entry> entries;
  for (const auto& m : header.members()) {
    if (m.first == "__metadata__") {
      if (!m.second.is_object()) throw Error(str(path, ": __metadata__ must be an object of strings"));
      for (const auto& kv : m.second.members()) {
        if (!kv.second.is_string())
          throw Error(str(path, ": __metadata__ value for \"", kv.first, "\" must be a string, got ", kv.second.dump()));
        out.metadata.emplace_back(kv.first, kv.second.as_string());
      }
      continue;
    }
    entries.push_back(parse_entry(path, m.first, m.second, data_bytes));
  }

  // The tensors must tile [0, data_bytes): sorted by offset, each starts where the previous ended.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t covered = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < covered)
      throw Error(str(path, ": tensor '", e.name, "' [", e.begin, ", ", e.end, ") overlaps tensor '", entries[i - 1].name,
                      "' [", entries[i - 1].begin, ", ", entries[i - 1].end, ")"));
    if (e.begin > covered)
      throw Error(str(path, ": data bytes [", covered, ", ", e.begin, ") belong to no tensor (before '", e.name, "')"));
    covered = e.end;
  }
  if (covered != data_bytes)
    throw Error(str(path, ": the tensors cover ", covered, " bytes but the data section holds ", data_bytes,
                    covered < data_bytes ? " (trailing bytes)" : ""));

  for (const auto& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu());
    if (e.end > e.begin) fd.read_at(t.data_ptr(), e.end - e.begin, data_start + e.begin);
    out.tensors.push_back({e.name, std::move(t)});
  }
  return out;
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t.tensor;
  }
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  const Tensor* t = find(name);
  if (!t) throw Error(str(path, ": no tensor '", name, "'"));
  return *t;
}

const std::string* SafetensorsFile::find_metadata(const std::string& key) const {
  for (const auto& kv : metadata) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

}  // namespace ft
