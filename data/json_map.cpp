#include "data/json_map.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "data/error.h"

namespace ft {
namespace {

// nlohmann/json's SAX parser does the JSON (escapes, surrogate pairs, UTF-8 checks); this keeps
// the pairs in file order as they arrive, without building a document of 50k members.
class FlatObjectReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit FlatObjectReader(const std::string& filename) : file_(filename) {}

  std::vector<std::pair<std::string, int64_t>> take() { return std::move(out_); }

  bool start_object(std::size_t) override {
    if (depth_++ > 0) fail("a nested object");
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool number_integer(number_integer_t v) override { return add(v); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max())) fail("an integer too large");
    return add(static_cast<int64_t>(v));
  }
  bool number_float(number_float_t, const string_t& text) override { fail("the number " + text); }
  bool null() override { fail("null"); }
  bool boolean(bool) override { fail("a boolean"); }
  bool string(string_t&) override { fail("a string"); }
  bool binary(binary_t&) override { fail("binary data"); }
  bool start_array(std::size_t) override { fail("an array"); }
  bool end_array() override { return true; }  // never reached: start_array throws

  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& e) override {
    // nlohmann's message after its "[json.exception.parse_error.101] " prefix.
    const std::string what = e.what();
    const size_t end = what.find("] ");
    throw DataError(file_ + ": invalid JSON at byte " + std::to_string(position) + ": " +
                    (end == std::string::npos ? what : what.substr(end + 2)));
  }

 private:
  bool add(int64_t v) {
    if (depth_ == 0) fail("a number");
    out_.emplace_back(std::move(key_), v);
    return true;
  }
  [[noreturn]] void fail(const std::string& found) const {
    const std::string where = depth_ == 0 ? "the top level" : "\"" + key_ + "\"";
    throw DataError(file_ + ": expected an object of integers, found " + found + " at " + where);
  }

  const std::string& file_;
  std::vector<std::pair<std::string, int64_t>> out_;
  std::string key_;
  int depth_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, int64_t>> parse_flat_json_object(std::string_view text,
                                                                    const std::string& filename) {
  FlatObjectReader reader(filename);
  nlohmann::json::sax_parse(text.begin(), text.end(), &reader);
  return reader.take();
}

}  // namespace ft
