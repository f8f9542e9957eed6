// Kernel throughput: decode matvec (GB/s of weights streamed), prefill matmul (GFLOP/s at
// n = 128), and a STREAM-like read bandwidth to compare the matvec figures against.
//
// Weight sets are replicated to exceed the last-level cache (>= 256 MiB per set, cycled
// through), so matvec numbers measure DRAM, not L3.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "common/cpu_time.h"
#include "common/huge_pages.h"
#include "common/thread_pool.h"
#include "gguf/ggml_type.h"
#include "gguf/tensor_view.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_paths.h"
#include "kernels/memory_bandwidth.h"
#include "kernels/quant.h"

namespace tangram {
namespace {

constexpr size_t kMinSetBytes = size_t{256} << 20;

ThreadPool& pool(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

// `copies` identical quantised rows x cols matrices in one buffer.
struct WeightSet {
  std::vector<uint8_t> bytes;
  std::vector<TensorView> views;
};

WeightSet make_weights(GgmlType type, int64_t rows, int64_t cols, bool replicate) {
  const size_t rb = ggml_row_bytes(type, cols);
  const size_t one = rb * static_cast<size_t>(rows);
  const size_t copies = replicate ? std::max<size_t>(2, (kMinSetBytes + one - 1) / one) : 1;
  WeightSet w;
  w.bytes.resize(one * copies);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    quantize_row(type, row.data(), w.bytes.data() + static_cast<size_t>(r) * rb, cols);
  }
  for (size_t c = 1; c < copies; ++c) std::copy_n(w.bytes.data(), one, w.bytes.data() + c * one);
  for (size_t c = 0; c < copies; ++c) {
    TensorView v;
    v.type = type;
    v.ne = {cols, rows, 1, 1};
    v.n_dims = 2;
    v.data = w.bytes.data() + c * one;
    v.nbytes = one;
    w.views.push_back(v);
  }
  return w;
}

std::vector<float> random_floats(size_t n) {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Args: type id, rows, cols, threads, tokens.
void BM_Matvec(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), n = state.range(4);
  const int threads = static_cast<int>(state.range(3));
  const WeightSet w = make_weights(type, rows, cols, /*replicate=*/true);
  const auto x = random_floats(static_cast<size_t>(n * cols));
  std::vector<float> y(static_cast<size_t>(n * rows));
  size_t next = 0;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    matmul(w.views[next], x.data(), n, y.data(), pool(threads));
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % w.views.size();
  }
  const double cpu = process_cpu_seconds() - cpu0;
  const double bytes =
      static_cast<double>(w.views[0].nbytes) * static_cast<double>(state.iterations());
  state.counters["GBps"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["GBps_cpu"] = bytes / 1e9 / (cpu / threads);
  // The kernel level too: TANGRAM_CPU=avx2 runs the same binary on the lower path.
  state.SetLabel(std::string(ggml_type_name(type)) + " " +
                 std::string(cpu::level_name(cpu::active_level())));
}

void BM_Prefill(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), n = state.range(4);
  const int threads = static_cast<int>(state.range(3));
  const WeightSet w = make_weights(type, rows, cols, /*replicate=*/false);
  const auto x = random_floats(static_cast<size_t>(n * cols));
  std::vector<float> y(static_cast<size_t>(n * rows));
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    matmul(w.views[0], x.data(), n, y.data(), pool(threads));
    benchmark::DoNotOptimize(y.data());
  }
  const double cpu = process_cpu_seconds() - cpu0;
  const double flops =
      2.0 * static_cast<double>(rows * cols * n) * static_cast<double>(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOPs_cpu"] = flops / 1e9 / (cpu / threads);
  state.SetLabel(std::string(ggml_type_name(type)));
}

// The interleaved kernels as a loaded model runs them: Q8_0 / Q4_K weights interleaved in place
// (interleave_for_matmul) in 2 MiB-aligned huge pages, n tokens, one thread, CPU time. Set 0:
// one 1024 x 2560 matrix called again and again, in L2/L3, so the kernel's own rate; set 1: a
// set of 9728 x 2560 matrices (an MLP's gate) past the last-level cache, cycled through, so the
// rate at which the kernel streams memory. Args: type id, set, tokens.
void BM_InterleavedDecode(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const bool streamed = state.range(1) != 0;
  const int64_t n = state.range(2), cols = 2560, rows = streamed ? 9728 : 1024;
  const size_t one = ggml_row_bytes(type, cols) * static_cast<size_t>(rows);
  const size_t copies = streamed ? (kMinSetBytes + one - 1) / one : 1;
  auto buffer = allocate_huge_page_buffer(one * copies, "bench weights");
  if (!buffer.ok()) {
    state.SkipWithError("no memory for the weights");
    return;
  }
  const WeightSet w = make_weights(type, rows, cols, /*replicate=*/false);
  std::vector<TensorView> views;
  for (size_t c = 0; c < copies; ++c) {
    uint8_t* bytes = buffer.value().get() + c * one;
    std::copy_n(w.bytes.data(), one, bytes);
    TensorView v = w.views[0];
    v.data = bytes;
    v.layout = interleave_for_matmul(v, bytes);
    views.push_back(v);
  }
  const auto x = random_floats(static_cast<size_t>(n * cols));
  std::vector<float> y(static_cast<size_t>(n * rows));
  size_t next = 0;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    matmul(views[next], x.data(), n, y.data(), pool(1));
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % views.size();
  }
  const double cpu = process_cpu_seconds() - cpu0, calls = static_cast<double>(state.iterations());
  state.counters["GMACs_cpu"] = static_cast<double>(rows * cols * n) * calls / 1e9 / cpu;
  state.counters["GBps_cpu"] = static_cast<double>(one) * calls / 1e9 / cpu;
  state.SetLabel(std::string(ggml_type_name(type)) + " " +
                 std::string(cpu::level_name(cpu::active_level())) +
                 (views[0].layout == TensorLayout::kRowMajor ? " row-major" : " interleaved"));
}

// Kernel compute rate with the weights in L2 (one thread, CPU time): how fast the dot
// products could stream if memory kept up, for n tokens at once (n > 1: the multi-token and
// tile kernels of batched decode). Args: type id, rows, cols, tokens. CPU time of one thread
// makes it the steadiest measure on a shared machine.
void BM_MatvecCached(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), n = state.range(3);
  const WeightSet w = make_weights(type, rows, cols, /*replicate=*/false);
  const auto x = random_floats(static_cast<size_t>(n * cols));
  std::vector<float> y(static_cast<size_t>(n * rows));
  for (auto _ : state) {
    matmul(w.views[0], x.data(), n, y.data(), pool(1));
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes =
      static_cast<double>(w.views[0].nbytes) * static_cast<double>(state.iterations());
  state.counters["GBps"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  const double macs =
      static_cast<double>(rows * cols * n) * static_cast<double>(state.iterations());
  state.counters["GMACs"] = benchmark::Counter(macs / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(ggml_type_name(type)) + " " +
                 std::string(cpu::level_name(cpu::active_level())));
}

// The crossover between matmul's two strategies (matmul_paths.h): n tokens through the
// quantised-activation decode path (path 0) or dequantise + sgemm (path 1), one thread, CPU
// time, weights in L2/L3 as in a prefill that reuses each tile. decode_max_tokens is set from
// where these meet, per type and kernel level (TANGRAM_CPU=avx2 measures the lower path).
// Args: type id, path, tokens.
void BM_PathCrossover(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const bool sgemm = state.range(1) != 0;
  const int64_t rows = 256, cols = 4096, n = state.range(2);
  const WeightSet w = make_weights(type, rows, cols, /*replicate=*/false);
  const auto x = random_floats(static_cast<size_t>(n * cols));
  std::vector<float> y(static_cast<size_t>(n * rows));
  for (auto _ : state) {
    if (sgemm)
      matmul_paths::prefill(w.views[0], x.data(), n, y.data(), pool(1));
    else
      matmul_paths::decode(w.views[0], x.data(), n, y.data(), pool(1));
    benchmark::DoNotOptimize(y.data());
  }
  const double flops =
      2.0 * static_cast<double>(rows * cols * n) * static_cast<double>(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(ggml_type_name(type)) + (sgemm ? " sgemm " : " decode ") +
                 std::string(cpu::level_name(cpu::active_level())));
}

// The engine's one read-bandwidth probe (kernels/memory_bandwidth.h, the ceiling that
// `tangram bench-model` reports), on a 512 MiB buffer: one measurement per iteration.
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  double best_gbps = 0;
  for (auto _ : state)
    best_gbps =
        std::max(best_gbps, measure_read_bandwidth(pool(threads), size_t{512} << 20, 1).read_gbps);
  state.counters["GBps"] = best_gbps;
}

constexpr int64_t kTypes[] = {
    static_cast<int64_t>(GgmlType::F32), static_cast<int64_t>(GgmlType::Q8_0),
    static_cast<int64_t>(GgmlType::Q4_K), static_cast<int64_t>(GgmlType::Q6_K)};

void matvec_args(benchmark::internal::Benchmark* b) {
  for (const int64_t t : kTypes)
    for (const int64_t rows : {4096, 1024})
      for (const int64_t threads : {1, 2}) b->Args({t, rows, 4096, threads, 1});
}

void prefill_args(benchmark::internal::Benchmark* b) {
  for (const int64_t t : kTypes)
    for (const int64_t rows : {4096, 1024}) b->Args({t, rows, 4096, 2, 128});
}

void cached_args(benchmark::internal::Benchmark* b) {
  for (const int64_t t : kTypes)
    for (const int64_t n : {1, 2, 4, 8, 16})
      b->Args({t, t == static_cast<int64_t>(GgmlType::F32) ? 32 : 128, 4096, n});
}

void prefill_one_thread_args(benchmark::internal::Benchmark* b) {
  for (const int64_t t : kTypes) b->Args({t, 1024, 4096, 1, 128});
}

// Prefill of 512 tokens through the 8-layer Qwen3-4B-shaped test models' MLP matrices (gate/up
// 9728 x 2560, down 2560 x 9728), one thread, CPU time: weights far beyond L2, as in the model,
// where BM_PathCrossover's 256 x 4096 sit in L2.
void prefill_model_shape_args(benchmark::internal::Benchmark* b) {
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    b->Args({static_cast<int64_t>(type), 9728, 2560, 1, 512});
    b->Args({static_cast<int64_t>(type), 2560, 9728, 1, 512});
  }
}

void crossover_args(benchmark::internal::Benchmark* b) {
  for (const GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const auto t = static_cast<int64_t>(type);
    for (const int64_t path : {0, 1})
      for (const int64_t n : {16, 32, 48, 64, 96, 128, 256, 512}) b->Args({t, path, n});
  }
}

void interleaved_decode_args(benchmark::internal::Benchmark* b) {
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K})
    for (const int64_t set : {0, 1})
      for (const int64_t n : {1, 4, 8, 16}) b->Args({static_cast<int64_t>(type), set, n});
}
BENCHMARK(BM_InterleavedDecode)
    ->Apply(interleaved_decode_args)
    ->ArgNames({"type", "streamed", "n"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatvecCached)
    ->Apply(cached_args)
    ->ArgNames({"type", "rows", "cols", "n"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Prefill)
    ->Name("BM_PrefillOneThreadCpuTime")
    ->Apply(prefill_one_thread_args)
    ->ArgNames({"type", "rows", "cols", "threads", "n"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Prefill)
    ->Name("BM_PrefillModelShape")
    ->Apply(prefill_model_shape_args)
    ->ArgNames({"type", "rows", "cols", "threads", "n"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PathCrossover)
    ->Apply(crossover_args)
    ->ArgNames({"type", "sgemm", "n"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
// Decode of a batch of sequences: n tokens against one weight matrix (continuous batching).
void batch_decode_args(benchmark::internal::Benchmark* b) {
  for (const int64_t t : kTypes)
    for (const int64_t n : {1, 2, 3, 4, 8, 16}) b->Args({t, 4096, 4096, 2, n});
}
BENCHMARK(BM_Matvec)
    ->Name("BM_BatchDecode")
    ->Apply(batch_decode_args)
    ->ArgNames({"type", "rows", "cols", "threads", "n"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Matvec)
    ->Apply(matvec_args)
    ->ArgNames({"type", "rows", "cols", "threads", "n"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Prefill)
    ->Apply(prefill_args)
    ->ArgNames({"type", "rows", "cols", "threads", "n"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tangram

BENCHMARK_MAIN();
