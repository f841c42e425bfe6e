#include "train/config/json.h"

#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ft {

// ---------------------------------------------------------------- values

Json Json::array(std::vector<Json> items) {
  Json j;
  j.type_ = Type::Array;
  j.items_ = std::move(items);
  return j;
}

Json Json::object(std::vector<Member> members) {
  Json j;
  j.type_ = Type::Object;
  j.members_ = std::move(members);
  return j;
}

void Json::set_unsigned(unsigned long long v) {
  if (v <= static_cast<unsigned long long>(std::numeric_limits<int64_t>::max())) {
    type_ = Type::Int;
    int_ = static_cast<int64_t>(v);
  } else {
    type_ = Type::UInt;
    uint_ = v;
  }
}

const char* Json::type_name() const {
  switch (type_) {
    case Type::Null: return "null";
    case Type::Bool: return "a boolean";
    case Type::Int:
    case Type::UInt: return "an integer";
    case Type::Double: return "a number";
    case Type::String: return "a string";
    case Type::Array: return "an array";
    case Type::Object: return "an object";
  }
  return "?";
}

#define FT_JSON_EXPECT(cond, expected) \
  FT_CHECK_ARG(cond, "[json] expected ", expected, ", got ", type_name(), " ", dump())

bool Json::as_bool() const {
  FT_JSON_EXPECT(is_bool(), "a boolean");
  return bool_;
}

int64_t Json::as_int64() const {
  FT_JSON_EXPECT(type_ == Type::Int, "a 64-bit signed integer");
  return int_;
}

uint64_t Json::as_uint64() const {
  FT_JSON_EXPECT(type_ == Type::UInt || (type_ == Type::Int && int_ >= 0), "a non-negative integer");
  return type_ == Type::UInt ? uint_ : static_cast<uint64_t>(int_);
}

double Json::as_double() const {
  FT_JSON_EXPECT(is_number(), "a number");
  if (type_ == Type::Int) return static_cast<double>(int_);
  if (type_ == Type::UInt) return static_cast<double>(uint_);
  return double_;
}

const std::string& Json::as_string() const {
  FT_JSON_EXPECT(is_string(), "a string");
  return string_;
}

const std::vector<Json>& Json::items() const {
  FT_JSON_EXPECT(is_array(), "an array");
  return items_;
}
std::vector<Json>& Json::items() {
  FT_JSON_EXPECT(is_array(), "an array");
  return items_;
}
const std::vector<Json::Member>& Json::members() const {
  FT_JSON_EXPECT(is_object(), "an object");
  return members_;
}
std::vector<Json::Member>& Json::members() {
  FT_JSON_EXPECT(is_object(), "an object");
  return members_;
}

const Json* Json::find(const std::string& key) const {
  for (const auto& m : members()) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

const Json& Json::at(const std::string& key) const {
  const Json* j = find(key);
  FT_CHECK_ARG(j != nullptr, "[json] missing key \"", key, "\"");
  return *j;
}

Json& Json::set(const std::string& key, Json value) {
  for (auto& m : members()) {
    if (m.first == key) {
      m.second = std::move(value);
      return m.second;
    }
  }
  members_.emplace_back(key, std::move(value));
  return members_.back().second;
}

void Json::push_back(Json value) { items().push_back(std::move(value)); }

size_t Json::size() const {
  if (is_array()) return items_.size();
  if (is_object()) return members_.size();
  return 0;
}

bool Json::operator==(const Json& o) const {
  // Numbers compare by value: 32768.0 written out reads back as the integer 32768.
  if (is_number() && o.is_number() && type_ != o.type_) {
    if (is_integer() && o.is_integer()) return false;  // Int vs UInt: UInt is always > INT64_MAX
    return as_double() == o.as_double();
  }
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::Null: return true;
    case Type::Bool: return bool_ == o.bool_;
    case Type::Int: return int_ == o.int_;
    case Type::UInt: return uint_ == o.uint_;
    case Type::Double: return double_ == o.double_;
    case Type::String: return string_ == o.string_;
    case Type::Array: return items_ == o.items_;
    case Type::Object: return members_ == o.members_;
  }
  return false;
}

// ---------------------------------------------------------------- writer: nlohmann/json

namespace {

// ordered_json keeps our member order. Depth is bounded by the reader (and by what the writers
// build), so the recursion is too.
nlohmann::ordered_json to_nlohmann(const Json& j) {
  switch (j.type()) {
    case Json::Type::Null: return nullptr;
    case Json::Type::Bool: return j.as_bool();
    case Json::Type::Int: return j.as_int64();
    case Json::Type::UInt: return j.as_uint64();
    case Json::Type::Double: return j.as_double();  // written as null when not finite
    case Json::Type::String: return j.as_string();
    case Json::Type::Array: {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (const Json& item : j.items()) a.push_back(to_nlohmann(item));
      return a;
    }
    case Json::Type::Object: {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      for (const auto& [key, value] : j.members()) o.emplace(key, to_nlohmann(value));
      return o;
    }
  }
  return nullptr;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; ours name the file instead.
std::string without_exception_id(const std::string& what) {
  const size_t end = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? what.substr(end + 2) : what;
}

}  // namespace

std::string Json::dump(int indent) const {
  try {
    return to_nlohmann(*this).dump(indent);
  } catch (const nlohmann::json::exception& e) {
    throw Error(str("[json] cannot write the value: ", without_exception_id(e.what())));
  }
}

// ---------------------------------------------------------------- reader: nlohmann/json's SAX parser

namespace {

// Deep enough for any file we read; shallow enough that hostile input cannot exhaust the stack
// (Json's destructor and dump() recurse; nlohmann's parser itself does not).
constexpr size_t kMaxDepth = 256;

// Builds a Json from nlohmann's parse events. Integers arrive as int64 or uint64 exactly as
// written (a seed or a byte offset above 2^53 survives); what JSON allows but our files must not
// hold, duplicate keys, is refused here.
class Builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit Builder(const std::string& what) : what_(what) {}

  Json take() { return std::move(root_); }

  bool null() override { return add(Json()); }
  bool boolean(bool v) override { return add(Json(v)); }
  bool number_integer(number_integer_t v) override { return add(Json(static_cast<long long>(v))); }
  bool number_unsigned(number_unsigned_t v) override { return add(Json(static_cast<unsigned long long>(v))); }
  bool number_float(number_float_t v, const string_t&) override { return add(Json(v)); }
  bool string(string_t& v) override { return add(Json(std::move(v))); }
  bool binary(binary_t&) override { return false; }  // not produced by the JSON parser

  bool start_object(std::size_t) override { return open(Json::object()); }
  bool key(string_t& k) override {
    if (!open_.back().keys.insert(k).second) throw Error(str(what_, ": duplicate key \"", k, "\""));
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    throw Error(str(what_, ": ", without_exception_id(e.what())));
  }

 private:
  struct Open {
    Json value;
    std::string key;                       // the key this value goes under in its parent object
    std::unordered_set<std::string> keys;  // an object's keys so far
  };

  bool add(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
    } else if (open_.back().value.is_array()) {
      open_.back().value.push_back(std::move(v));
    } else {
      open_.back().value.members().emplace_back(std::move(key_), std::move(v));
    }
    return true;
  }
  bool open(Json container) {
    if (open_.size() >= kMaxDepth) throw Error(str(what_, ": nesting deeper than ", kMaxDepth, " levels"));
    open_.push_back(Open{std::move(container), std::move(key_), {}});
    return true;
  }
  bool close() {
    Open done = std::move(open_.back());
    open_.pop_back();
    key_ = std::move(done.key);
    return add(std::move(done.value));
  }

  const std::string& what_;
  std::vector<Open> open_;
  std::string key_;
  Json root_;
};

}  // namespace

Json Json::parse(const std::string& text, const std::string& what) {
  Builder builder(what);
  nlohmann::json::sax_parse(text, &builder);
  return builder.take();
}

}  // namespace ft
