// The session disk store: put/get/erase, ids of any bytes kept off the file system's paths, the
// size cap enforced least recently used first (also across restarts), reopening finds the
// sessions, a crash's temp files and damaged frames are cleaned up, one store per directory, and
// a truncated or byte-flipped session file is never served as a session (decode_session refuses
// it).
#include "store/session_disk_store.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "store/session_codec.h"
#include "store/session_test_util.h"
#include "support/test_support.h"

namespace tangram {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<SessionDiskStore> open_store(const fs::path& dir, uint64_t cap) {
  auto s = SessionDiskStore::open(dir, cap);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::string blob_of(size_t n, char fill) { return std::string(n, fill); }

// Frame bytes of a file: magic, id length, id.
uint64_t file_bytes(std::string_view id, size_t blob) { return 12 + id.size() + blob; }

TEST(SessionDiskStore, PutGetEraseAndReplace) {
  const fs::path dir = testing::temp_dir() / "kv";
  auto s = open_store(dir, 1 << 20);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->put("alice", blob_of(100, 'a')).ok());
  ASSERT_TRUE(s->put("bob", blob_of(50, 'b')).ok());
  EXPECT_TRUE(s->contains("alice"));
  EXPECT_EQ(s->get("alice").value(), blob_of(100, 'a'));
  EXPECT_EQ(s->get("bob").value(), blob_of(50, 'b'));
  EXPECT_EQ(s->bytes(), file_bytes("alice", 100) + file_bytes("bob", 50));
  // Replace: the new version, the byte count follows.
  ASSERT_TRUE(s->put("alice", blob_of(10, 'z')).ok());
  EXPECT_EQ(s->get("alice").value(), blob_of(10, 'z'));
  EXPECT_EQ(s->bytes(), file_bytes("alice", 10) + file_bytes("bob", 50));
  EXPECT_EQ(s->list().size(), 2u);
  EXPECT_TRUE(s->erase("alice").value());
  EXPECT_FALSE(s->erase("alice").value());
  EXPECT_FALSE(s->get("alice").ok());
  EXPECT_FALSE(s->contains("alice"));
  EXPECT_EQ(s->bytes(), file_bytes("bob", 50));
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"LOCK", SessionDiskStore::file_name("bob")}));
  // An empty blob is a valid value.
  ASSERT_TRUE(s->put("empty", "").ok());
  EXPECT_EQ(s->get("empty").value(), "");
}

TEST(SessionDiskStore, IdsOfAnyBytesNeverBecomePaths) {
  const fs::path root = testing::temp_dir();
  const fs::path dir = root / "kv";
  auto s = open_store(dir, 1 << 20);
  ASSERT_TRUE(s);
  const std::vector<std::string> ids = {
      "../../escape", "/etc/passwd", "a/b/c", std::string("nul\0byte", 8),
      "..",           ".",           "LOCK",  std::string(SessionDiskStore::kMaxIdBytes, 'x'),
      "ünïcödé"};
  for (size_t i = 0; i < ids.size(); ++i)
    ASSERT_TRUE(s->put(ids[i], blob_of(i + 1, static_cast<char>('A' + i))).ok()) << i;
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(s->get(ids[i]).value(), blob_of(i + 1, static_cast<char>('A' + i))) << i;
  // Only hashed names inside the directory, nothing outside it.
  for (const std::string& name : files_in(dir))
    EXPECT_TRUE(name == "LOCK" || (name.size() == 36 && name.ends_with(".kvs"))) << name;
  EXPECT_EQ(files_in(root), std::set<std::string>{"kv"});
  EXPECT_EQ(files_in(dir).size(), ids.size() + 1);
  EXPECT_FALSE(s->put("", "x").ok());
  EXPECT_FALSE(s->put(std::string(SessionDiskStore::kMaxIdBytes + 1, 'x'), "x").ok());
}

TEST(SessionDiskStore, EvictsLeastRecentlyUsedUnderTheCap) {
  const fs::path dir = testing::temp_dir() / "kv";
  const uint64_t one = file_bytes("a", 1000);
  auto s = open_store(dir, 3 * one + 10);
  ASSERT_TRUE(s);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(s->put(id, blob_of(1000, id[0])).ok());
  ASSERT_TRUE(s->get("a").ok());  // a is now the most recent; b the least
  ASSERT_TRUE(s->put("d", blob_of(1000, 'd')).ok());
  EXPECT_FALSE(s->contains("b"));
  EXPECT_TRUE(s->contains("a") && s->contains("c") && s->contains("d"));
  EXPECT_EQ(s->evictions(), 1);
  EXPECT_LE(s->bytes(), s->max_bytes());
  const auto l = s->list();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].id, "d");
  EXPECT_EQ(l[1].id, "a");
  EXPECT_EQ(l[2].id, "c");
  // Replacing a session with a larger version evicts others, never itself.
  ASSERT_TRUE(s->put("c", blob_of(2000, 'c')).ok());
  EXPECT_TRUE(s->contains("c"));
  EXPECT_LE(s->bytes(), s->max_bytes());
  EXPECT_EQ(s->get("c").value(), blob_of(2000, 'c'));
  // Larger than the whole cap: refused, nothing evicted.
  const auto before = s->list().size();
  EXPECT_FALSE(s->put("huge", blob_of(4 * 1000, 'h')).ok());
  EXPECT_EQ(s->list().size(), before);
  EXPECT_FALSE(s->contains("huge"));
  EXPECT_FALSE(fs::exists(dir / (SessionDiskStore::file_name("huge") + ".tmp")));
}

TEST(SessionDiskStore, ReopenFindsTheSessionsAndTheirOrder) {
  const fs::path dir = testing::temp_dir() / "kv";
  const uint64_t one = file_bytes("a", 500);
  {
    auto s = open_store(dir, 1 << 20);
    ASSERT_TRUE(s);
    for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(s->put(id, blob_of(500, id[0])).ok());
    ASSERT_TRUE(s->get("a").ok());  // order now, least recent first: b, c, a
    // A second store on the same directory is refused while this one lives.
    auto other = SessionDiskStore::open(dir, 1 << 20);
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.message().find("in use"), std::string::npos) << other.message();
  }
  {
    auto s = open_store(dir, 1 << 20);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->open_report().sessions, 3);
    EXPECT_EQ(s->open_report().bytes, 3 * one);
    EXPECT_EQ(s->get("b").value(), blob_of(500, 'b'));  // order now: c, a, b
  }
  // Reopened with room for two: the least recently used (c) goes.
  auto s = open_store(dir, 2 * one);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->open_report().evicted, 1);
  EXPECT_FALSE(s->contains("c"));
  EXPECT_EQ(s->get("a").value(), blob_of(500, 'a'));
  EXPECT_EQ(s->get("b").value(), blob_of(500, 'b'));
}

TEST(SessionDiskStore, OpenRemovesCrashLeftoversAndDamagedFrames) {
  const fs::path dir = testing::temp_dir() / "kv";
  {
    auto s = open_store(dir, 1 << 20);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->put("kept", blob_of(64, 'k')).ok());
    ASSERT_TRUE(s->put("renamed", blob_of(64, 'r')).ok());
  }
  // A write interrupted before its rename, someone else's files (kept), a session file whose frame
  // is garbage, and a session file moved under another id's name.
  std::ofstream(dir / (SessionDiskStore::file_name("new") + ".tmp")) << "half a session";
  std::ofstream(dir / "other.tmp") << "x";
  std::ofstream(dir / "notes.txt") << "not ours";
  std::ofstream(dir / SessionDiskStore::file_name("garbage")) << "not a frame at all";
  fs::rename(dir / SessionDiskStore::file_name("renamed"),
             dir / SessionDiskStore::file_name("imposter"));
  auto s = open_store(dir, 1 << 20);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->open_report().temp_removed, 1);
  EXPECT_EQ(s->open_report().corrupt_removed, 2);
  EXPECT_EQ(s->open_report().sessions, 1);
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"LOCK", "notes.txt", "other.tmp",
                                                  SessionDiskStore::file_name("kept")}));
  EXPECT_EQ(s->get("kept").value(), blob_of(64, 'k'));
}

// Files named like sessions that are not regular files: a FIFO (whose blocking open waited for a
// writer forever, hanging the server's start), a link and a directory. Each is skipped and left
// alone, and the real session beside them is found.
TEST(SessionDiskStore, OpenSkipsFifosLinksAndDirectories) {
  const fs::path dir = testing::temp_dir() / "kv";
  {
    auto s = open_store(dir, 1 << 20);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->put("kept", blob_of(64, 'k')).ok());
  }
  const fs::path fifo = dir / SessionDiskStore::file_name("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_symlink(dir / SessionDiskStore::file_name("kept"),
                     dir / SessionDiskStore::file_name("link"));
  fs::create_directory(dir / SessionDiskStore::file_name("folder"));
  std::unique_ptr<SessionDiskStore> opened;
  std::string error;
  std::atomic<bool> done{false};
  std::thread opener([&] {
    auto s = SessionDiskStore::open(dir, 1 << 20);
    if (s.ok())
      opened = std::move(s).value();
    else
      error = s.message();
    done = true;
  });
  for (int i = 0; i < 6000 && !done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!done) {
    // Blocked on the FIFO: a writer releases it, so that the test fails instead of hanging.
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    opener.join();
    if (w >= 0) ::close(w);
    FAIL() << "opening the store blocked on a FIFO";
  }
  opener.join();
  ASSERT_TRUE(opened) << error;
  auto* s = &opened;
  EXPECT_EQ((*s)->open_report().skipped, 3);
  EXPECT_EQ((*s)->open_report().sessions, 1);
  EXPECT_EQ((*s)->get("kept").value(), blob_of(64, 'k'));
  EXPECT_TRUE(fs::is_fifo(fifo));  // left as it was
}

// Damage to a stored session: a truncated file or a flipped byte of the blob comes back from get
// (the store does not know the codec) and decode_session refuses it; damage to the frame makes
// get itself refuse and drop the file.
TEST(SessionDiskStore, DamagedSessionFilesAreNeverServed) {
  const fs::path dir = testing::temp_dir() / "kv";
  auto s = open_store(dir, 64 << 20);
  ASSERT_TRUE(s);
  auto r = testing::ragged(KvType::F16, testing::contiguous_map(2), 4, 2);
  const SessionFingerprint fp = testing::fingerprint_of(KvType::F16, *r.map);
  const std::string blob = encode_session(*r.cache, r.tokens, fp).value();
  auto pool = testing::make_pool(KvType::F16, 4, 2, 256);
  auto decode = [&](const std::string& b) {
    return decode_session(b, fp, *pool, r.map, testing::kSessionShape, 512);
  };
  const fs::path file = dir / SessionDiskStore::file_name("s");
  const uint64_t frame = 12 + 1;
  ASSERT_TRUE(s->put("s", blob).ok());
  ASSERT_TRUE(decode(s->get("s").value()).ok());
  // Truncated at several points of the blob.
  for (uint64_t keep : {frame + 0, frame + 50, frame + blob.size() / 2, frame + blob.size() - 1}) {
    ASSERT_TRUE(s->put("s", blob).ok());
    fs::resize_file(file, keep);
    auto got = s->get("s");
    ASSERT_TRUE(got.ok()) << got.message();
    auto d = decode(*got);
    ASSERT_FALSE(d.ok()) << "truncated to " << keep;
    EXPECT_NE(d.message().find("truncated"), std::string::npos) << d.message();
  }
  // Byte flips inside the blob.
  for (uint64_t at : {frame + 3, frame + 100, frame + blob.size() / 3, frame + blob.size() - 5}) {
    ASSERT_TRUE(s->put("s", blob).ok());
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    const int c = f.get();
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x10));
    f.close();
    auto got = s->get("s");
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_FALSE(decode(*got).ok()) << "flip at " << at;
  }
  EXPECT_EQ(pool->used_pages(), 0);
  // A flipped id byte in the frame: get refuses and the file is dropped.
  ASSERT_TRUE(s->put("s", blob).ok());
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12);
    f.put('t');
  }
  EXPECT_FALSE(s->get("s").ok());
  EXPECT_FALSE(s->contains("s"));
  EXPECT_FALSE(fs::exists(file));
  // A file removed behind the store's back.
  ASSERT_TRUE(s->put("gone", "x").ok());
  fs::remove(dir / SessionDiskStore::file_name("gone"));
  EXPECT_FALSE(s->get("gone").ok());
  EXPECT_FALSE(s->contains("gone"));
  EXPECT_EQ(s->bytes(), 0u);
}

}  // namespace
}  // namespace tangram
