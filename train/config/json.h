// The JSON value train/ passes around, for the files flashtrain writes itself: safetensors
// headers, state.json, Hugging Face config.json and metrics.jsonl.
//
// Reading and writing are nlohmann/json's (json.cpp): its parser feeds this value event by event
// and its serialiser writes it. The value stays a small class of ours rather than
// nlohmann::ordered_json itself: typed access throws ft::Error naming the expected type and the
// value (nlohmann's type errors name neither), and find() returns a pointer, which the trainer,
// checkpoint and safetensors code is written against. Integers are kept as 64-bit integers (a
// seed or a byte offset above 2^53 survives a round trip), objects keep insertion order (files
// stay readable and diffable), and the reader refuses duplicate keys and nesting deeper than 256
// levels, naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ft {

class Json {
 public:
  enum class Type { Null, Bool, Int, UInt, Double, String, Array, Object };
  using Member = std::pair<std::string, Json>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::Bool), bool_(b) {}
  Json(int v) : type_(Type::Int), int_(v) {}
  Json(long v) : type_(Type::Int), int_(v) {}
  Json(long long v) : type_(Type::Int), int_(v) {}
  // Unsigned values that fit int64 are stored as Int, so equal numbers compare equal.
  Json(unsigned v) : type_(Type::Int), int_(v) {}
  Json(unsigned long v) { set_unsigned(v); }
  Json(unsigned long long v) { set_unsigned(v); }
  Json(double v) : type_(Type::Double), double_(v) {}
  Json(const char* s) : type_(Type::String), string_(s) {}
  Json(std::string s) : type_(Type::String), string_(std::move(s)) {}

  static Json array(std::vector<Json> items = {});
  static Json object(std::vector<Member> members = {});

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::UInt || type_ == Type::Double; }
  bool is_integer() const { return type_ == Type::Int || type_ == Type::UInt; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Typed access; each throws ft::Error naming the expected and actual type (and the value when
  // an integer is out of range for the asked type).
  bool as_bool() const;
  int64_t as_int64() const;
  uint64_t as_uint64() const;
  double as_double() const;  // any number
  const std::string& as_string() const;
  const std::vector<Json>& items() const;    // array
  std::vector<Json>& items();
  const std::vector<Member>& members() const;  // object, in insertion order
  std::vector<Member>& members();

  // Object access. find returns nullptr when absent; at throws naming the key; set replaces an
  // existing member or appends.
  const Json* find(const std::string& key) const;
  const Json& at(const std::string& key) const;
  Json& set(const std::string& key, Json value);
  // Array append.
  void push_back(Json value);
  size_t size() const;  // elements of an array or members of an object, else 0

  // Serialises. indent < 0: one line, no spaces ({"a":1,"b":[1,2]}); indent >= 0: one member or
  // element per line, indented by `indent` spaces a level. Doubles use a short form that reads
  // back to the same value ("0.1", "1e-08"; whole numbers keep a ".0"); non-finite doubles are
  // written as null, since JSON has no inf or nan.
  std::string dump(int indent = -1) const;

  // Parses exactly one JSON value (surrounding whitespace allowed). Throws ft::Error
  // "<what>: <problem>" (a syntax error gives its line and column); `what` names the file or
  // field being read.
  static Json parse(const std::string& text, const std::string& what = "json");

  const char* type_name() const;
  // Structural equality; numbers compare by value across Int/Double (1 == 1.0).
  bool operator==(const Json& o) const;
  bool operator!=(const Json& o) const { return !(*this == o); }

 private:
  void set_unsigned(unsigned long long v);

  Type type_ = Type::Null;
  bool bool_ = false;
  int64_t int_ = 0;
  uint64_t uint_ = 0;  // only for values above INT64_MAX
  double double_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<Member> members_;
};

}  // namespace ft
