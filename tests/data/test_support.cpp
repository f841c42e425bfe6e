#include "test_support.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "data/error.h"
#include "data/mapped_file.h"

namespace ft::test {

const BpeTokenizer* gpt2_tokenizer(std::string* why) {
  static std::unique_ptr<BpeTokenizer> tok;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    try {
      tok = std::make_unique<BpeTokenizer>(BpeTokenizer::load());
    } catch (const DataError& e) {
      error = e.what();
    }
  }
  if (!tok && why) *why = error;
  return tok.get();
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/ft_data_test.XXXXXX";
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
  path_ = templ;
}

TempDir::~TempDir() {
  const std::string cmd = "rm -rf '" + path_ + "'";
  if (std::system(cmd.c_str()) != 0) {
    // Leaving a temporary directory behind is harmless; nothing to report from a destructor.
  }
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<TokenizerCase> load_tokenizer_cases(const std::string& name) {
  const std::string path = std::string(FT_DATA_FIXTURE_DIR) + "/" + name;
  std::istringstream in(read_file(path));
  std::vector<TokenizerCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    if (t1 == std::string::npos || t2 == std::string::npos) throw std::runtime_error(path + ": bad line: " + line);
    TokenizerCase c;
    c.name = line.substr(0, t1);
    const std::string hex = line.substr(t1 + 1, t2 - t1 - 1);
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      c.text.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    std::istringstream ids(line.substr(t2 + 1));
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  if (cases.empty()) throw std::runtime_error(path + ": no cases");
  return cases;
}

}  // namespace ft::test
