// Where the binary finds its data (retention profiles and the like) without a compile-time
// path, so that an installed `tangram` can be moved: see data_dir().
#pragma once

#include <filesystem>
#include <vector>

namespace tangram {

// The first of: $TANGRAM_DATA_DIR; <folder of the executable>/../share/tangram (what
// `cmake --install` lays out); the source tree's data/ (a build run in place). The folder holds
// profiles/<scorer>/<model>/..., calibration/ and, in the source tree, models/.
std::filesystem::path data_dir();

// Where the shipped calibration text may be, in order: <data_dir()>/calibration, then the source
// tree's data/calibration.
std::vector<std::filesystem::path> calibration_folders();

// The held-out recall conversations `tangram recall` scores policies on:
// <data_dir()>/eval/recall-heldout.jsonl, else the source tree's.
std::filesystem::path default_recall_set();

// llama.cpp's oracle (oracle.mjs, with node-llama-cpp installed beside it by `npm install`):
// $TANGRAM_ORACLE_DIR; else whichever of <data_dir()>/oracle (installed) and the source tree's
// tools/oracle has node-llama-cpp, in that order; else the first of them that exists, so a
// message can say where to install it.
std::filesystem::path oracle_dir();

}  // namespace tangram
