#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "tests/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/checkpoint/safetensors.h"

namespace ft {
namespace {

// A file as the format spells it: 8-byte little-endian length, header, data.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string error_loading(const std::string& path) {
  return test::error_of([&] { load_safetensors(path); });
}

TEST(Safetensors, WriterProducesTheExactBytes) {
  test::ScratchDir dir;
  const std::string path = dir / "x.safetensors";
  save_safetensors(path, {{"x", Tensor::from_vector<float>({1.f, 2.f}, {2})}});
  // {"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is 54 bytes; two spaces pad it to 56.
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  )";
  const std::string data("\x00\x00\x80\x3F\x00\x00\x00\x40", 8);  // 1.0f, 2.0f little-endian
  EXPECT_EQ(test::read_bytes(path), file_bytes(header, data));
}

TEST(Safetensors, WriterOrdersByItemSizeAndWritesMetadata) {
  test::ScratchDir dir;
  const std::string path = dir / "m.safetensors";
  save_safetensors(path,
                   {{"b", Tensor::from_vector<uint8_t>({7, 8, 9}, {3})}, {"a", Tensor::from_vector<int64_t>({-1}, {1})}},
                   {{"format", "pt"}});
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  const std::string data = std::string(8, '\xFF') + std::string("\x07\x08\x09", 3);
  EXPECT_EQ(test::read_bytes(path), file_bytes(padded, data));
  EXPECT_EQ((8 + padded.size()) % 8, 0u);
}

TEST(Safetensors, ReadsAHandBuiltFile) {
  test::ScratchDir dir;
  const std::string path = dir / "h.safetensors";
  // Unpadded header, bf16 scalar-free 2x2 tensor, an f16 empty tensor and metadata.
  const std::string header =
      R"({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}, "e": {"dtype": "F16", "shape": [0, 3], )"
      R"("data_offsets": [8, 8]}, "__metadata__": {"format": "pt", "note": "hi"}})";
  // bf16 1.0 = 0x3F80, -2.0 = 0xC000, 0.5 = 0x3F00, 3.0 = 0x4040
  const std::string data("\x80\x3F\x00\xC0\x00\x3F\x40\x40", 8);
  test::write_text(path, file_bytes(header, data));
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  const Tensor& w = f.at("w");
  EXPECT_EQ(w.dtype(), DType::BF16);
  EXPECT_EQ(w.shape(), (Shape{2, 2}));
  EXPECT_EQ(w.to_floats(), (std::vector<float>{1.f, -2.f, 0.5f, 3.f}));
  EXPECT_EQ(f.at("e").shape(), (Shape{0, 3}));
  ASSERT_NE(f.find_metadata("note"), nullptr);
  EXPECT_EQ(*f.find_metadata("note"), "hi");
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(error_loading(dir / "nope"), dir / "nope" + ": cannot open: No such file or directory");
}

TEST(Safetensors, RoundTripsEveryDtype) {
  test::ScratchDir dir;
  const std::vector<NamedTensor> in = {
      {"f32", Tensor::from_vector<float>({1.5f, -0.f, 3e38f, 1e-40f, 7.f, 8.f}, {2, 3})},
      {"bf16", Tensor::from_floats({1.f, 2.f, -3.5f}, {3}, DType::BF16)},
      {"f16", Tensor::from_floats({0.25f, 65504.f}, {1, 2}, DType::F16)},
      {"f64", Tensor::from_vector<double>({1.0 / 3.0}, {})},
      {"i32", Tensor::from_vector<int32_t>({-7, 1 << 30}, {2})},
      {"i64", Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX}, {2, 1})},
      {"u16", Tensor::from_vector<uint16_t>({50256, 0, 65535}, {3})},
      {"u8", Tensor::from_vector<uint8_t>({255}, {1, 1, 1})},
      // A non-contiguous view: written as its logical (transposed) values.
      {"view", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1)},
  };
  save_safetensors(dir / "all.safetensors", in);
  const SafetensorsFile f = load_safetensors(dir / "all.safetensors");
  ASSERT_EQ(f.tensors.size(), in.size());
  for (const auto& t : in) {
    const Tensor& got = f.at(t.name);
    EXPECT_EQ(got.dtype(), t.tensor.dtype()) << t.name;
    EXPECT_EQ(got.shape(), t.tensor.shape()) << t.name;
    const Tensor want = t.tensor.contiguous();
    EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()), 0) << t.name;
  }
  EXPECT_EQ(f.at("view").to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // Every tensor starts at a multiple of its item size from the start of the file.
}

TEST(Safetensors, WriterRejectsBadNamesAndLeavesNoFile) {
  test::ScratchDir dir;
  const Tensor t = Tensor::zeros({1}, DType::F32);
  EXPECT_THROW(save_safetensors(dir / "d", {{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(save_safetensors(dir / "d", {{"", t}}), Error);
  EXPECT_THROW(save_safetensors(dir / "d", {{"__metadata__", t}}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "d"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // no temporary left behind
}

struct BadCase {
  const char* what;
  std::string bytes;
  const char* problem;  // expected message after "<path>: "
};

TEST(Safetensors, ReaderNamesEveryProblem) {
  auto entry = [](const char* name, const char* dtype, const char* shape, const char* offsets) {
    return str("\"", name, "\":{\"dtype\":\"", dtype, "\",\"shape\":", shape, ",\"data_offsets\":", offsets, "}");
  };
  const std::string d8(8, '\0');
  const std::vector<BadCase> cases = {
      {"short", std::string("\x01\x02", 2), "file is 2 bytes, too short for the 8-byte header length"},
      {"length", file_bytes("{}", "").substr(0, 8) + "{", "header length 2 exceeds the 1 bytes after the length field"},
      {"huge", std::string("\x00\x00\x00\x00\x00\x00\x00\x10", 8) + std::string(16, ' '),
       "header length 1152921504606846976 exceeds the 16 bytes after the length field"},
      {"brace", file_bytes("[1,2]", ""), "header does not start with '{' (not a safetensors file?)"},
      {"json", file_bytes("{\"a\":", ""),
       "header: parse error at line 1, column 6: syntax error while parsing value - unexpected end of input; "
       "expected '[', '{', or a literal"},
      {"dup", file_bytes("{" + entry("a", "U8", "[1]", "[0,1]") + "," + entry("a", "U8", "[1]", "[1,2]") + "}", "xy"),
       "header: duplicate key \"a\""},
      {"dtype", file_bytes("{" + entry("a", "Q8", "[1]", "[0,1]") + "}", "x"), "tensor 'a': unknown dtype \"Q8\""},
      {"bool", file_bytes("{" + entry("a", "BOOL", "[1]", "[0,1]") + "}", "x"),
       "tensor 'a': dtype BOOL is not supported by flashtrain"},
      {"span", file_bytes("{" + entry("a", "F32", "[3]", "[0,8]") + "}", d8),
       "tensor 'a': shape [3] of F32 needs 3 x 4 bytes but data_offsets span 8"},
      {"range", file_bytes("{" + entry("a", "F32", "[4]", "[0,16]") + "}", d8),
       "tensor 'a': data_offsets [0, 16) are outside the data section of 8 bytes"},
      {"reversed", file_bytes("{" + entry("a", "U8", "[0]", "[4,2]") + "}", d8),
       "tensor 'a': data_offsets [4, 2) are outside the data section of 8 bytes"},
      {"negative", file_bytes("{" + entry("a", "U8", "[-1]", "[0,1]") + "}", "x"),
       "tensor 'a': each shape entry must be a non-negative integer, got -1"},
      {"overlap", file_bytes("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[1]", "[4,8]") + "}", d8),
       "tensor 'b' [4, 8) overlaps tensor 'a' [0, 8)"},
      {"hole", file_bytes("{" + entry("a", "F32", "[1]", "[4,8]") + "}", d8),
       "data bytes [0, 4) belong to no tensor (before 'a')"},
      {"trailing", file_bytes("{" + entry("a", "F32", "[1]", "[0,4]") + "}", d8),
       "the tensors cover 4 bytes but the data section holds 8 (trailing bytes)"},
      {"field", file_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", "x"),
       "tensor 'a': unknown field \"x\""},
      {"missing", file_bytes(R"({"a":{"dtype":"U8","shape":[1]}})", "x"), "tensor 'a': needs dtype, shape and data_offsets"},
      {"meta", file_bytes(R"({"__metadata__":{"n":1}})", ""), "__metadata__ value for \"n\" must be a string, got 1"},
  };
  test::ScratchDir dir;
  for (const auto& c : cases) {
    const std::string path = dir / c.what;
    test::write_text(path, c.bytes);
    EXPECT_EQ(error_loading(path), path + ": " + c.problem) << c.what;
  }
}

}  // namespace
}  // namespace ft
