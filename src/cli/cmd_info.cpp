// `tangram info FILE`: metadata, tensor directory and sizes of a GGUF file; `--cpu`: the CPU's
// SIMD features and which kernel path runs on it.
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "common/units.h"
#include "gguf/gguf_file.h"
#include "kernels/cpu_features.h"

namespace tangram::cli {

namespace {

void print_cpu() {
  const cpu::LevelChoice& choice = cpu::active();
  std::string levels;
  for (const cpu::KernelLevel l : cpu::supported_levels())
    levels += (levels.empty() ? "" : ", ") + std::string(cpu::level_name(l));
  const cpu::CpuFeatures& f = cpu::features();
  fmt::print("cpu:            {}\n", cpu::describe(f));
  fmt::print("cpu features:   {}\n", cpu::feature_list());
  fmt::print("kernel levels:  {} (this CPU can run)\n", levels);
  fmt::print("kernel path:    {} ({})\n", cpu::level_name(choice.level), choice.reason);
  fmt::print("kernel tuning:  {}\n", cpu::describe(cpu::tuning()));
}

}  // namespace

int cmd_info(const InfoOptions& opt) {
  if (opt.cpu) {
    print_cpu();
    if (opt.model.empty()) return 0;
    fmt::print("\n");
  } else if (opt.model.empty()) {
    fmt::print(stderr, "error: give a GGUF file, or --cpu\n");
    return 1;
  }
  auto file = GgufFile::open(opt.model);
  if (!file) {
    fmt::print(stderr, "error: {}\n", file.message());
    return 1;
  }
  const GgufFile& f = **file;
  fmt::print("file:       {}\n", f.path());
  fmt::print("format:     GGUF v{}, {} ({} bytes), alignment {}, data at offset {}\n", f.version(),
             format_bytes(static_cast<double>(f.file_size())), f.file_size(), f.alignment(),
             f.data_offset());

  fmt::print("\nmetadata ({} keys):\n", f.metadata().size());
  for (const auto& kv : f.metadata()) {
    const size_t max_items = opt.full ? SIZE_MAX : 8;
    std::string v = kv.value.to_string(max_items);
    if (!opt.full && v.size() > 200) v = v.substr(0, 200) + fmt::format("... ({} chars)", v.size());
    fmt::print("  {:<44} {}\n", kv.key, v);
  }

  std::map<std::string, std::pair<int64_t, size_t>> by_type;  // type -> (count, bytes)
  size_t total = 0;
  int64_t params = 0;
  for (const auto& t : f.tensors()) {
    auto& e = by_type[std::string(ggml_type_name(t.type))];
    e.first++;
    e.second += t.nbytes;
    total += t.nbytes;
    params += t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
  }
  fmt::print("\ntensors: {} tensors, {} parameters, {}\n", f.tensors().size(), params,
             format_bytes(static_cast<double>(total)));
  for (const auto& [type, e] : by_type)
    fmt::print("  {:<6} {:>5} tensors {:>12}\n", type, e.first,
               format_bytes(static_cast<double>(e.second)));

  const size_t limit = opt.full ? f.tensors().size() : std::min<size_t>(f.tensors().size(), 40);
  fmt::print("\n  {:<36} {:<6} {:<28} {:>12}\n", "name", "type", "shape (ne0 first)", "bytes");
  for (size_t i = 0; i < limit; ++i) {
    const auto& t = f.tensors()[i];
    std::string shape;
    for (int d = 0; d < t.n_dims; ++d)
      shape += (d ? " x " : "") + std::to_string(t.ne[static_cast<size_t>(d)]);
    fmt::print("  {:<36} {:<6} {:<28} {:>12}\n", t.name, ggml_type_name(t.type), shape, t.nbytes);
  }
  if (limit < f.tensors().size())
    fmt::print("  ... {} more (use --full to list all)\n", f.tensors().size() - limit);
  return 0;
}

Command register_info(CLI::App& app) {
  auto opt = std::make_shared<InfoOptions>();
  InfoOptions& info = *opt;
  auto* c_info = app.add_subcommand(
      "info", "Show a GGUF file's metadata, tensors and sizes, or the CPU's kernel path");
  c_info->add_option("model", info.model, "GGUF file (optional with --cpu)")
      ->check(CLI::ExistingFile);
  c_info->add_flag("--full", info.full, "List every tensor and full metadata values");
  c_info->add_flag("--cpu", info.cpu,
                   "Show the CPU's SIMD features and the kernel path in use (avx2 or avx512; "
                   "TANGRAM_CPU=avx2 forces the lower one)");
  return {c_info, [opt] { return cmd_info(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
