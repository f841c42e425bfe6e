#include "train/checkpoint/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "train/checkpoint/file_util.h"
#include "train/checkpoint/hf_gpt2_names.h"

namespace fs = std::filesystem;

namespace ft {

namespace {

constexpr const char* kFormat = "flashtrain-checkpoint";
constexpr int64_t kVersion = 1;
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kConfigFile = "config.json";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";

// "ckpt-<digits>" -> step; -1 for any other name (including ckpt-12.tmp).
int64_t step_of(const std::string& dirname) {
  const std::string prefix = "ckpt-";
  if (dirname.compare(0, prefix.size(), prefix) != 0 || dirname.size() == prefix.size() || dirname.size() > prefix.size() + 18)
    return -1;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < dirname.size(); ++i) {
    if (dirname[i] < '0' || dirname[i] > '9') return -1;
    step = step * 10 + (dirname[i] - '0');
  }
  return step;
}

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

// Each dimension that differs, under both names ("n_embd = 768 (config d_model = 512)"): the
// config keys are not GPT2Config's, and a user fixes the config by the second name.
std::string dims_differences(const Gpt2Dims& found, const Gpt2Dims& want) {
  struct Field {
    const char* hf;
    const char* ours;
    int64_t Gpt2Dims::*value;
  };
  static const Field kFields[] = {
      {"vocab_size", "vocab_size", &Gpt2Dims::vocab_size}, {"n_positions", "max_seq_len", &Gpt2Dims::n_positions},
      {"n_embd", "d_model", &Gpt2Dims::n_embd},            {"n_layer", "n_layers", &Gpt2Dims::n_layer},
      {"n_head", "n_heads", &Gpt2Dims::n_head},            {"n_inner", "d_ff", &Gpt2Dims::n_inner},
  };
  std::string out;
  for (const Field& f : kFields) {
    if (found.*f.value == want.*f.value) continue;
    out += str(out.empty() ? "" : ", ", f.hf, " = ", found.*f.value, " (config ", f.ours, " = ", want.*f.value, ")");
  }
  if (found.kv_heads() != want.kv_heads())  // 0 and n_head are the same: compare the head counts
    out += str(out.empty() ? "" : ", ", "n_kv_head = ", found.kv_heads(), " (config n_kv_heads = ", want.kv_heads(),
               want.grouped() ? "" : ", i.e. n_heads", ")");
  return out;
}

std::string dims_mismatch(const std::string& config_path, const Gpt2Dims& found, const Gpt2Dims& want) {
  return str(config_path, ": the model's dimensions differ from the config's: ", dims_differences(found, want));
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw Error(str(path, ": cannot remove: ", ec.message()));
}

void rename_dir(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw Error(str(to, ": cannot rename ", from, " into place: ", ec.message()));
}

Json read_json_file(const std::string& path) { return Json::parse(read_file_contents(path), path); }

}  // namespace

std::string save_checkpoint(const std::string& out_dir, const Checkpoint& ckpt) {
  FT_CHECK_ARG(ckpt.state.step >= 0, "[checkpoint] step must be >= 0, got ", ckpt.state.step);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(str(out_dir, ": cannot create the output directory: ", ec.message()));

  const std::string final_dir = join(out_dir, str("ckpt-", ckpt.state.step));
  const std::string tmp_dir = final_dir + ".tmp";
  remove_tree(tmp_dir);  // left over from an interrupted write
  fs::create_directory(tmp_dir, ec);
  if (ec) throw Error(str(tmp_dir, ": cannot create: ", ec.message()));

  std::string old_dir;  // an earlier checkpoint of the same step, moved aside while publishing
  try {
    const Gpt2Dims dims = Gpt2Dims::from_config(ckpt.config);
    save_safetensors(join(tmp_dir, kModelFile), to_hf_gpt2(ckpt.model, dims), {{"format", "pt"}});
    Json hf_config = hf_gpt2_config_json(ckpt.config);
    if (!ckpt.model.empty() && ckpt.model[0].tensor.dtype() != DType::F32)  // say what the file holds
      hf_config.set("torch_dtype", ckpt.model[0].tensor.dtype() == DType::BF16 ? "bfloat16" : "float16");
    write_file_atomic(join(tmp_dir, kConfigFile), hf_config.dump(2) + "\n");
    save_safetensors(join(tmp_dir, kOptimizerFile), ckpt.optimizer, {{"format", "flashtrain-optimizer"}});

    Json files = Json::object();
    for (const char* f : {kModelFile, kConfigFile, kOptimizerFile}) files.set(f, static_cast<uint64_t>(fs::file_size(join(tmp_dir, f))));
    const Json state = Json::object({
        {"format", kFormat},
        {"version", kVersion},
        {"step", ckpt.state.step},
        {"config", config_to_json(ckpt.config)},
        {"rng", Json::object({{"seed", ckpt.state.rng.seed}, {"offset", ckpt.state.rng.offset}})},
        {"data_position", ckpt.state.data_position},
        {"loss_scaler", ckpt.state.loss_scaler},
        {"extra", ckpt.state.extra},
        {"files", std::move(files)},
    });
    write_file_atomic(join(tmp_dir, kStateFile), state.dump(2) + "\n");
    fsync_directory(tmp_dir);

    // Publish. rename cannot replace a non-empty directory, so an existing checkpoint of this step
    // is moved aside to ckpt-<step>.old.tmp first and deleted last: a complete copy exists at every
    // instant (prune_checkpoints puts an orphaned .old.tmp back).
    if (fs::exists(final_dir)) {
      old_dir = final_dir + ".old.tmp";
      remove_tree(old_dir);
      rename_dir(final_dir, old_dir);
    }
    rename_dir(tmp_dir, final_dir);
    fsync_directory(out_dir);
    if (!old_dir.empty()) remove_tree(old_dir);
  } catch (...) {
    std::error_code ignore;
    fs::remove_all(tmp_dir, ignore);
    if (!old_dir.empty() && !fs::exists(final_dir, ignore)) fs::rename(old_dir, final_dir, ignore);  // put it back
    throw;
  }
  return final_dir;
}

bool is_complete_checkpoint(const std::string& dir) {
  const int64_t step = step_of(fs::path(dir).filename().string());
  if (step < 0) return false;
  try {
    const Json state = read_json_file(join(dir, kStateFile));
    if (!state.is_object() || state.at("format") != Json(kFormat) || state.at("step") != Json(step)) return false;
    const Json& files = state.at("files");
    for (const char* f : {kModelFile, kConfigFile, kOptimizerFile}) {
      std::error_code ec;
      const uint64_t size = fs::file_size(join(dir, f), ec);
      if (ec || files.at(f).as_uint64() != size) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& out_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const int64_t step = step_of(entry.path().filename().string());
    if (step >= 0 && entry.is_directory() && is_complete_checkpoint(entry.path().string()))
      out.emplace_back(step, entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> find_latest_checkpoint(const std::string& out_dir) {
  const auto all = list_checkpoints(out_dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

std::vector<std::string> prune_checkpoints(const std::string& out_dir, int64_t keep) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) return removed;
  // Collected first: changing a directory while iterating it is unspecified.
  std::vector<std::string> leftovers;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, 5, "ckpt-") == 0 && name.size() > 9 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
        entry.is_directory())
      leftovers.push_back(name);
  }
  const std::string old_suffix = ".old.tmp";
  for (const auto& name : leftovers) {
    const std::string path = join(out_dir, name);
    if (name.size() > old_suffix.size() && name.compare(name.size() - old_suffix.size(), old_suffix.size(), old_suffix) == 0) {
      // A replaced checkpoint whose replacement never arrived (a crash between the two renames).
      const std::string original = join(out_dir, name.substr(0, name.size() - old_suffix.size()));
      if (!fs::exists(original)) {
        rename_dir(path, original);
        continue;
      }
    }
    remove_tree(path);
    removed.push_back(path);
  }
  if (keep > 0) {
    const auto all = list_checkpoints(out_dir);
    for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
      remove_tree(all[i].second);
      removed.push_back(all[i].second);
    }
  }
  return removed;
}

std::vector<NamedTensor> load_hf_gpt2_weights(const std::string& dir, const Gpt2Dims& dims) {
  const std::string config_path = join(dir, kConfigFile);
  const Gpt2Dims found = gpt2_dims_from_hf_config(read_json_file(config_path), config_path);
  if (!(found == dims)) throw Error(dims_mismatch(config_path, found, dims));
  const SafetensorsFile file = load_safetensors(join(dir, kModelFile));
  try {
    return from_hf_gpt2(file.tensors, dims);
  } catch (const Error& e) {
    throw Error(str(file.path, ": ", e.what()));
  }
}

InitWeights load_hf_gpt2_for_init(const std::string& dir, const Gpt2Dims& dims) {
  const std::string config_path = join(dir, kConfigFile);
  const Gpt2Dims found = gpt2_dims_from_hf_config(read_json_file(config_path), config_path);
  // Every dimension but n_positions must match; more positions than the run's are cropped below.
  Gpt2Dims same_positions = found;
  same_positions.n_positions = dims.n_positions;
  if (!(same_positions == dims)) throw Error(dims_mismatch(config_path, same_positions, dims));
  if (found.n_positions < dims.n_positions)
    throw Error(str(config_path, ": n_positions = ", found.n_positions, " is fewer than the config's max_seq_len = ",
                    dims.n_positions, "; a position table can be cropped but not extended: set max_seq_len to at most ",
                    found.n_positions));
  InitWeights w;
  w.file_positions = found.n_positions;
  w.model = load_hf_gpt2_weights(dir, found);
  for (NamedTensor& t : w.model) {
    if (t.name == "wpe.weight" && found.n_positions > dims.n_positions)
      t.tensor = t.tensor.slice(0, 0, dims.n_positions).contiguous();  // (Tmax, C) -> (T, C)
  }
  w.note = found.n_positions > dims.n_positions
               ? str("weights from ", dir, "; its position table (n_positions = ", found.n_positions,
                     ") cropped to the first ", dims.n_positions, " rows for max_seq_len = ", dims.n_positions)
               : str("weights from ", dir);
  return w;
}

Checkpoint load_checkpoint(const std::string& dir) {
  const std::string state_path = join(dir, kStateFile);
  const Json state = read_json_file(state_path);
  try {
    FT_CHECK_ARG(state.is_object() && state.at("format") == Json(kFormat), "not a flashtrain checkpoint state");
    FT_CHECK_ARG(state.at("version") == Json(kVersion), "version ", state.at("version").dump(), " is not ", kVersion);
  } catch (const Error& e) {
    throw Error(str(state_path, ": ", e.what()));
  }
  Checkpoint ck;
  ck.config = config_from_json(state.at("config"), state_path + " config");
  ck.model = load_hf_gpt2_weights(dir, Gpt2Dims::from_config(ck.config));
  ck.optimizer = load_safetensors(join(dir, kOptimizerFile)).tensors;
  try {
    ck.state.step = state.at("step").as_int64();
    ck.state.rng.seed = state.at("rng").at("seed").as_uint64();
    ck.state.rng.offset = state.at("rng").at("offset").as_uint64();
    ck.state.data_position = state.at("data_position");
    ck.state.loss_scaler = state.at("loss_scaler");
    ck.state.extra = state.at("extra");
  } catch (const Error& e) {
    throw Error(str(state_path, ": ", e.what()));
  }
  return ck;
}

}  // namespace ft
