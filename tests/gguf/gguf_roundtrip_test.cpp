// GgufWriter -> GgufFile round trips: every metadata value type, several tensor types and
// shapes, alignment handling, atomic replacement and writer-side validation.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <numbers>
#include <random>

#include "gguf/gguf_file.h"
#include "gguf_test_util.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using testing::RawGguf;
using testing::temp_dir;
using testing::write_bytes;

GgufValue scalar_u(GgufValueType t, uint64_t v) {
  GgufValue x;
  x.type = t;
  x.u = v;
  x.i = static_cast<int64_t>(v);
  return x;
}

GgufValue scalar_i(GgufValueType t, int64_t v) {
  GgufValue x;
  x.type = t;
  x.i = v;
  x.u = static_cast<uint64_t>(v);
  return x;
}

GgufValue scalar_f(GgufValueType t, double v) {
  GgufValue x;
  x.type = t;
  x.f = v;
  return x;
}

GgufValue int_array(GgufValueType elem, std::vector<int64_t> v) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.elem_type = elem;
  x.ints = std::move(v);
  return x;
}

GgufValue float_array(GgufValueType elem, std::vector<double> v) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.elem_type = elem;
  x.floats = std::move(v);
  return x;
}

// Field-by-field equality of the parts a value of its type uses.
void expect_same_value(const GgufValue& a, const GgufValue& b, const std::string& key) {
  SCOPED_TRACE(key);
  ASSERT_EQ(a.type, b.type);
  switch (a.type) {
    case GgufValueType::STRING:
      EXPECT_EQ(a.s, b.s);
      break;
    case GgufValueType::BOOL:
      EXPECT_EQ(a.b, b.b);
      break;
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64:
      EXPECT_EQ(a.f, b.f);
      break;
    case GgufValueType::ARRAY:
      EXPECT_EQ(a.elem_type, b.elem_type);
      EXPECT_EQ(a.strings, b.strings);
      EXPECT_EQ(a.ints, b.ints);
      EXPECT_EQ(a.floats, b.floats);
      break;
    default:
      if (gguf_type_is_unsigned(a.type)) {
        EXPECT_EQ(a.u, b.u);
      } else {
        EXPECT_EQ(a.i, b.i);
      }
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct TensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
};

// One tensor of each supported type, 1 to 4 dims, including an empty one.
std::vector<TensorSpec> tensor_specs() {
  return {
      {"f32.vec", GgmlType::F32, {7}},           {"f16.mat", GgmlType::F16, {3, 5}},
      {"q4_0.mat", GgmlType::Q4_0, {64, 3}},     {"q8_0.3d", GgmlType::Q8_0, {32, 2, 2}},
      {"q4_k.mat", GgmlType::Q4_K, {256, 2}},    {"q6_k.4d", GgmlType::Q6_K, {512, 1, 1, 2}},
      {"bf16.4d", GgmlType::BF16, {4, 4, 2, 1}}, {"q8_k.row", GgmlType::Q8_K, {256}},
      {"empty", GgmlType::F32, {0, 3}},
  };
}

size_t spec_bytes(const TensorSpec& s) {
  int64_t rows = 1;
  for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
  return ggml_row_bytes(s.type, s.ne[0]) * static_cast<size_t>(rows);
}

// Every metadata value type with boundary values, plus arrays of each element type.
std::vector<GgufKV> all_value_kvs() {
  using T = GgufValueType;
  std::vector<GgufKV> kvs = {
      {"t.u8", scalar_u(T::UINT8, 255)},
      {"t.i8", scalar_i(T::INT8, -128)},
      {"t.u16", scalar_u(T::UINT16, 65535)},
      {"t.i16", scalar_i(T::INT16, -32768)},
      {"t.u32", scalar_u(T::UINT32, 4294967295u)},
      {"t.i32", scalar_i(T::INT32, std::numeric_limits<int32_t>::min())},
      {"t.f32", scalar_f(T::FLOAT32, static_cast<double>(0.1f))},
      {"t.u64", scalar_u(T::UINT64, std::numeric_limits<uint64_t>::max())},
      {"t.i64", scalar_i(T::INT64, std::numeric_limits<int64_t>::min())},
      {"t.f64", scalar_f(T::FLOAT64, -1.0 / 3.0)},
      {"t.a.u8", int_array(T::UINT8, {0, 1, 255})},
      {"t.a.i8", int_array(T::INT8, {-128, 0, 127})},
      {"t.a.u16", int_array(T::UINT16, {0, 65535})},
      {"t.a.i16", int_array(T::INT16, {-32768, 32767})},
      {"t.a.u32", int_array(T::UINT32, {0, 4294967295})},
      {"t.a.i32", int_array(T::INT32, {std::numeric_limits<int32_t>::min(), -1, 2})},
      {"t.a.u64", int_array(T::UINT64, {0, -1})},  // -1 is the bit pattern of UINT64_MAX
      {"t.a.i64", int_array(T::INT64, {std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max()})},
      {"t.a.bool", int_array(T::BOOL, {1, 0, 1})},
      {"t.a.f32", float_array(T::FLOAT32, {1.5, -0.25, static_cast<double>(1e-7f)})},
      {"t.a.f64", float_array(T::FLOAT64, {std::numbers::pi, -1e300, 0.0})},
      {"t.a.empty", int_array(T::INT32, {})},
  };
  GgufValue b;
  b.type = T::BOOL;
  b.b = true;
  b.i = b.u = 1;
  kvs.push_back({"t.bool", b});
  GgufValue s;
  s.type = T::STRING;
  s.s = std::string("h\xc3\xa9llo\n\0world", 13);  // UTF-8 and an embedded NUL
  kvs.push_back({"t.string", s});
  GgufValue e;
  e.type = T::STRING;
  kvs.push_back({"t.string.empty", e});
  GgufValue sa;
  sa.type = T::ARRAY;
  sa.elem_type = T::STRING;
  sa.strings = {"<unk>", "", "\xe2\x96\x81the", std::string(300, 'x')};
  kvs.push_back({"t.a.string", sa});
  return kvs;
}

TEST(GgufRoundTrip, EveryValueTypeAndTensorType) {
  const auto path = (temp_dir() / "all.gguf").string();
  GgufWriter w;
  const auto kvs = all_value_kvs();
  for (const auto& kv : kvs) w.set_value(kv.key, kv.value);
  const auto specs = tensor_specs();
  std::vector<std::vector<uint8_t>> datas;
  for (size_t k = 0; k < specs.size(); ++k) {
    datas.push_back(random_bytes(spec_bytes(specs[k]), static_cast<uint32_t>(k)));
    const Status s =
        w.add_tensor(specs[k].name, specs[k].type, specs[k].ne, datas[k].data(), datas[k].size());
    ASSERT_TRUE(s.ok()) << s.message();
  }
  const Status ws = w.write(path);
  ASSERT_TRUE(ws.ok()) << ws.message();

  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.find("general.alignment"), nullptr);  // the default is not written

  ASSERT_EQ(f.metadata().size(), kvs.size());
  for (size_t k = 0; k < kvs.size(); ++k) {
    EXPECT_EQ(f.metadata()[k].key, kvs[k].key);  // file order is kept
    expect_same_value(f.metadata()[k].value, kvs[k].value, kvs[k].key);
  }

  ASSERT_EQ(f.tensors().size(), specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    SCOPED_TRACE(specs[k].name);
    const GgufTensorInfo& t = f.tensors()[k];
    EXPECT_EQ(t.name, specs[k].name);
    EXPECT_EQ(t.type, specs[k].type);
    EXPECT_EQ(t.n_dims, static_cast<int>(specs[k].ne.size()));
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < specs[k].ne.size() ? specs[k].ne[d] : 1);
    EXPECT_EQ(t.nbytes, datas[k].size());
    EXPECT_EQ(t.offset % 32, 0u);
    const TensorView v = f.view(specs[k].name);
    ASSERT_FALSE(v.empty());
    EXPECT_EQ(v.name, specs[k].name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 32, 0u);  // mmap is page-aligned
    ASSERT_EQ(v.nbytes, datas[k].size());
    EXPECT_EQ(std::vector<uint8_t>(v.data, v.data + v.nbytes), datas[k]);
    EXPECT_EQ(f.find_tensor(specs[k].name), &t);
  }
  EXPECT_TRUE(f.view("missing").empty());
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
}

TEST(GgufRoundTrip, OpenMemoryMatchesOpen) {
  const auto path = (temp_dir() / "mem.gguf").string();
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  const auto specs = tensor_specs();
  for (size_t k = 0; k < specs.size(); ++k) {
    const auto data = random_bytes(spec_bytes(specs[k]), 7 + static_cast<uint32_t>(k));
    ASSERT_TRUE(
        w.add_tensor(specs[k].name, specs[k].type, specs[k].ne, data.data(), data.size()).ok());
  }
  ASSERT_TRUE(w.write(path).ok());
  const std::string bytes = testing::read_file(path);
  auto m = GgufFile::open_memory("in-memory", bytes.data(), bytes.size());
  ASSERT_TRUE(m.ok()) << m.message();
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*m)->path(), "in-memory");
  EXPECT_EQ((*m)->get_string("general.architecture"), "llama");
  ASSERT_EQ((*m)->tensors().size(), (*f)->tensors().size());
  for (const auto& t : (*f)->tensors()) {
    const TensorView a = (*m)->view(t.name);
    const TensorView b = (*f)->view(t.name);
    ASSERT_EQ(a.nbytes, b.nbytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << t.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 32, 0u)
        << t.name;  // keeps the file's alignment
  }
  EXPECT_FALSE(GgufFile::open_memory("none", nullptr, 0).ok());
}

TEST(GgufRoundTrip, TypedGetters) {
  const auto path = (temp_dir() / "getters.gguf").string();
  GgufWriter w;
  w.set_string("s", "llama");
  w.set_u32("u32", 5);
  w.set_i32("i32", -7);
  w.set_u64("u64.big", std::numeric_limits<uint64_t>::max());
  w.set_u64("u64.small", 1234567890123ull);
  w.set_f32("f32", 1e-5f);
  w.set_bool("bool", true);
  w.set_string_array("sa", {"a", "b"});
  w.set_i32_array("ia", {-1, 2, 3});
  w.set_f32_array("fa", {0.5f, -2.0f});
  w.set_u32("u32", 6);  // setting a key again replaces it in place
  ASSERT_TRUE(w.write(path).ok());
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& f = **r;

  EXPECT_EQ(f.metadata().size(), 10u);
  EXPECT_EQ(f.metadata()[1].key, "u32");
  EXPECT_EQ(f.get_string("s"), "llama");
  EXPECT_EQ(f.get_int("u32"), 6);
  EXPECT_EQ(f.get_int("i32"), -7);
  EXPECT_EQ(f.get_int("u64.small"), 1234567890123);
  EXPECT_EQ(f.get_int("u64.big"), std::nullopt);  // does not fit int64
  EXPECT_EQ(f.get_int("bool"), 1);
  EXPECT_EQ(f.get_float("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(f.get_float("i32"), -7.0);
  EXPECT_EQ(f.get_bool("bool"), true);
  EXPECT_EQ(f.get_bool("u32"), std::nullopt);
  EXPECT_EQ(f.get_string("u32"), std::nullopt);
  EXPECT_EQ(f.get_int("s"), std::nullopt);
  EXPECT_EQ(f.get_float("s"), std::nullopt);
  EXPECT_EQ(f.get_int("absent"), std::nullopt);
  ASSERT_NE(f.get_string_array("sa"), nullptr);
  EXPECT_EQ(*f.get_string_array("sa"), (std::vector<std::string>{"a", "b"}));
  ASSERT_NE(f.get_int_array("ia"), nullptr);
  EXPECT_EQ(*f.get_int_array("ia"), (std::vector<int64_t>{-1, 2, 3}));
  ASSERT_NE(f.get_float_array("fa"), nullptr);
  EXPECT_EQ(*f.get_float_array("fa"), (std::vector<double>{0.5, -2.0}));
  EXPECT_EQ(f.get_string_array("ia"), nullptr);
  EXPECT_EQ(f.get_int_array("fa"), nullptr);
  EXPECT_EQ(f.get_float_array("sa"), nullptr);
  EXPECT_EQ(f.get_int_array("s"), nullptr);
}

TEST(GgufRoundTrip, CopyingMetadataAndTensorsReproducesTheFileExactly) {
  const auto dir = temp_dir();
  GgufWriter w;
  for (const auto& kv : all_value_kvs()) w.set_value(kv.key, kv.value);
  w.set_alignment(64);
  const auto specs = tensor_specs();
  for (size_t k = 0; k < specs.size(); ++k) {
    const auto data = random_bytes(spec_bytes(specs[k]), 100 + static_cast<uint32_t>(k));
    ASSERT_TRUE(
        w.add_tensor(specs[k].name, specs[k].type, specs[k].ne, data.data(), data.size()).ok());
  }
  ASSERT_TRUE(w.write((dir / "a.gguf").string()).ok());

  auto r = GgufFile::open((dir / "a.gguf").string());
  ASSERT_TRUE(r.ok()) << r.message();
  GgufWriter copy;
  for (const auto& kv : (*r)->metadata()) copy.set_value(kv.key, kv.value);
  for (const auto& t : (*r)->tensors()) {
    const TensorView v = (*r)->view(t);
    const std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    ASSERT_TRUE(copy.add_tensor(t.name, t.type, ne, v.data, v.nbytes).ok());
  }
  ASSERT_TRUE(copy.write((dir / "b.gguf").string()).ok());
  const std::string a = testing::read_file(dir / "a.gguf");
  EXPECT_GT(a.size(), 0u);
  EXPECT_EQ(a, testing::read_file(dir / "b.gguf"));
}

TEST(GgufRoundTrip, AlignmentIsHonouredAndWritten) {
  const auto path = (temp_dir() / "align.gguf").string();
  GgufWriter w;
  w.set_alignment(128);
  const std::vector<float> small(3, 1.0f);
  ASSERT_TRUE(w.add_tensor("a", GgmlType::F32, {3}, small.data(), 12).ok());
  ASSERT_TRUE(w.add_tensor("b", GgmlType::F32, {3}, small.data(), 12).ok());
  ASSERT_TRUE(w.write(path).ok());
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ((*r)->alignment(), 128u);
  EXPECT_EQ((*r)->get_int("general.alignment"), 128);
  EXPECT_EQ((*r)->find("general.alignment")->type, GgufValueType::UINT32);
  EXPECT_EQ((*r)->data_offset() % 128, 0u);
  EXPECT_EQ((*r)->find_tensor("b")->offset, 128u);
  EXPECT_EQ((*r)->file_size(), (*r)->data_offset() + 256);  // each tensor padded to 128
}

TEST(GgufRoundTrip, NoTensorsAndNoMetadata) {
  const auto path = (temp_dir() / "empty.gguf").string();
  ASSERT_TRUE(GgufWriter().write(path).ok());
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE((*r)->metadata().empty());
  EXPECT_TRUE((*r)->tensors().empty());
  EXPECT_EQ((*r)->file_size(), 32u);  // 24-byte header padded to 32
}

TEST(GgufRoundTrip, WriteReplacesAtomicallyAndLeavesNoTemporaries) {
  const auto dir = temp_dir();
  const auto path = (dir / "m.gguf").string();
  write_bytes(path, "old contents");
  GgufWriter w;
  w.set_string("general.name", "new");
  ASSERT_TRUE(w.write(path).ok());
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ((*r)->get_string("general.name"), "new");
  size_t n_files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n_files;
  EXPECT_EQ(n_files, 1u);

  const Status bad = w.write((dir / "no-such-dir" / "m.gguf").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("no-such-dir"), std::string::npos) << bad.message();
}

TEST(GgufWriter, RefusesInvalidInput) {
  const std::vector<uint8_t> buf(4096);
  GgufWriter w;
  EXPECT_FALSE(w.add_tensor("", GgmlType::F32, {1}, buf.data(), 4).ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {}, buf.data(), 4).ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}, buf.data(), 4).ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {-1}, buf.data(), 4).ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {2}, buf.data(), 4).ok());    // wrong byte count
  EXPECT_FALSE(w.add_tensor("x", GgmlType::Q4_0, {16}, buf.data(), 9).ok());  // not a whole block
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {1}, nullptr, 4).ok());
  EXPECT_FALSE(w.add_tensor("x", static_cast<GgmlType>(99), {1}, buf.data(), 4).ok());
  EXPECT_FALSE(
      w.add_tensor("x", GgmlType::F32, {int64_t{1} << 62, 8}, buf.data(), 4).ok());  // overflow
  ASSERT_TRUE(w.add_tensor("x", GgmlType::F32, {1}, buf.data(), 4).ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {1}, buf.data(), 4).ok());  // duplicate

  const auto dir = temp_dir();
  GgufWriter bad_align;
  bad_align.set_alignment(24);
  EXPECT_FALSE(bad_align.write((dir / "a.gguf").string()).ok());
  GgufWriter zero_align;
  zero_align.set_alignment(0);
  EXPECT_FALSE(zero_align.write((dir / "b.gguf").string()).ok());
  GgufWriter out_of_range;
  out_of_range.set_value("k", scalar_u(GgufValueType::UINT8, 256));
  EXPECT_FALSE(out_of_range.write((dir / "c.gguf").string()).ok());
  GgufWriter bad_array;
  bad_array.set_value("k", int_array(GgufValueType::INT8, {200}));
  EXPECT_FALSE(bad_array.write((dir / "d.gguf").string()).ok());
  GgufWriter wrong_vector;
  GgufValue v = int_array(GgufValueType::FLOAT32, {1});
  wrong_vector.set_value("k", v);
  EXPECT_FALSE(wrong_vector.write((dir / "e.gguf").string()).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "a.gguf"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            0);
}

TEST(GgufReader, ReadsVersion2) {
  const auto path = (temp_dir() / "v2.gguf").string();
  RawGguf g;
  g.header(2, 1, 2).kv_str("general.architecture", "llama").kv_u32("llama.block_count", 3);
  g.tensor("w", {4, 2}, 0, 0).pad(32);
  for (int k = 0; k < 8; ++k) g.put(static_cast<float>(k));
  write_bytes(path, g.bytes);
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ((*r)->version(), 2u);
  EXPECT_EQ((*r)->get_string("general.architecture"), "llama");
  EXPECT_EQ((*r)->get_int("llama.block_count"), 3);
  const TensorView v = (*r)->view("w");
  ASSERT_EQ(v.nbytes, 32u);
  EXPECT_EQ(v.rows(), 2);
  float last;
  std::memcpy(&last, v.row(1) + 12, 4);
  EXPECT_EQ(last, 7.0f);
}

TEST(GgufReader, NestedArraysAreParsedAndRendered) {
  const auto path = (temp_dir() / "nested.gguf").string();
  RawGguf g;
  g.header(3, 0, 2);
  // [[1, 2], [3]] as an array of two i32 arrays
  g.str("nested").u32(9).u32(9).u64(2);
  g.u32(5).u64(2).put<int32_t>(1).put<int32_t>(2);
  g.u32(5).u64(1).put<int32_t>(3);
  // [["a"], []] as an array of string arrays, one empty
  g.str("nested.s").u32(9).u32(9).u64(2);
  g.u32(8).u64(1).str("a");
  g.u32(8).u64(0);
  write_bytes(path, g.bytes);
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufValue* v = (*r)->find("nested");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->elem_type, GgufValueType::ARRAY);
  EXPECT_EQ(v->strings, (std::vector<std::string>{"[1, 2]", "[3]"}));
  EXPECT_EQ(v->to_string(), "[[1, 2], [3]]");
  EXPECT_EQ((*r)->find("nested.s")->to_string(), "[[\"a\"], []]");
  // Nested arrays can be displayed but not written back.
  GgufWriter w;
  w.set_value("nested", *v);
  EXPECT_FALSE(w.write((temp_dir() / "out.gguf").string()).ok());
}

TEST(GgufValue, ToString) {
  using T = GgufValueType;
  EXPECT_EQ(scalar_u(T::UINT32, 42).to_string(), "42");
  EXPECT_EQ(scalar_u(T::UINT64, std::numeric_limits<uint64_t>::max()).to_string(),
            "18446744073709551615");
  EXPECT_EQ(scalar_i(T::INT8, -5).to_string(), "-5");
  EXPECT_EQ(scalar_f(T::FLOAT32, static_cast<double>(1e-5f)).to_string(), "1e-05");
  EXPECT_EQ(scalar_f(T::FLOAT64, 0.5).to_string(), "0.5");
  GgufValue s;
  s.type = T::STRING;
  s.s = "a\"b\\c\nd\x01";
  EXPECT_EQ(s.to_string(), "\"a\\\"b\\\\c\\nd\\x01\"");
  GgufValue b;
  b.type = T::BOOL;
  b.b = true;
  EXPECT_EQ(b.to_string(), "true");

  std::vector<int64_t> many(512);
  for (size_t k = 0; k < many.size(); ++k) many[k] = static_cast<int64_t>(k);
  const GgufValue ia = int_array(T::INT32, many);
  EXPECT_EQ(ia.to_string(3), "[0, 1, 2, ... (512 items)]");
  EXPECT_EQ(ia.to_string(0), "[... (512 items)]");
  EXPECT_EQ(int_array(T::INT32, {1, 2}).to_string(2), "[1, 2]");
  EXPECT_EQ(int_array(T::BOOL, {1, 0}).to_string(), "[true, false]");
  EXPECT_EQ(int_array(T::UINT64, {-1}).to_string(), "[18446744073709551615]");
  EXPECT_EQ(float_array(T::FLOAT32, {0.5, static_cast<double>(0.1f)}).to_string(), "[0.5, 0.1]");
  EXPECT_EQ(int_array(T::INT32, {}).to_string(), "[]");
  GgufValue sa;
  sa.type = T::ARRAY;
  sa.elem_type = T::STRING;
  sa.strings = {"<s>", "x y", "z"};
  EXPECT_EQ(sa.to_string(2), "[\"<s>\", \"x y\", ... (3 items)]");
  // An inconsistent value (items in the wrong vector) renders without reading out of bounds.
  GgufValue wrong = int_array(T::FLOAT32, {1, 2});
  EXPECT_EQ(wrong.to_string(), "[]");

  EXPECT_EQ(gguf_value_type_name(T::FLOAT64), "f64");
  EXPECT_EQ(gguf_value_type_name(T::ARRAY), "array");
}

}  // namespace
}  // namespace tangram
