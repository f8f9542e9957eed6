// A vocabulary's token bytes as a prefix tree, built once per vocabulary and shared by every
// request's constrained decoding: a mask over the vocabulary walks it with the grammar's matcher
// and drops a whole subtree at the first byte the grammar refuses, so each distinct prefix is
// judged once and a refused one costs nothing more.
//
// The nodes lie in depth-first order (children by byte value): a walk is a loop over the array,
// and skipping a subtree is one jump to its end.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tangram {

class TokenTrie {
 public:
  TokenTrie() = default;
  // pieces[id]: [n_vocab] each token's bytes; the tokens listed in `ids` enter the tree (a token
  // with no bytes would sit on the root and is the caller's to leave out).
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> ids);

  // Nodes, the root (node 0: the empty prefix) included.
  int32_t size() const { return static_cast<int32_t>(byte_.size()); }
  // Node ≥ 1: the byte it adds to its parent's prefix, and its prefix's length.
  uint8_t byte(int32_t node) const { return byte_[static_cast<size_t>(node)]; }
  int32_t depth(int32_t node) const { return depth_[static_cast<size_t>(node)]; }
  // One past the last node of the node's subtree.
  int32_t subtree_end(int32_t node) const { return end_[static_cast<size_t>(node)]; }
  // The tokens whose bytes are exactly the node's prefix.
  std::span<const int32_t> tokens(int32_t node) const {
    const auto i = static_cast<size_t>(node);
    return std::span<const int32_t>(tokens_).subspan(
        static_cast<size_t>(first_token_[i]),
        static_cast<size_t>(first_token_[i + 1] - first_token_[i]));
  }
  int32_t max_depth() const { return max_depth_; }

 private:
  std::vector<uint8_t> byte_;         // [n_nodes]
  std::vector<int32_t> depth_;        // [n_nodes]
  std::vector<int32_t> end_;          // [n_nodes]
  std::vector<int32_t> first_token_;  // [n_nodes + 1] into tokens_
  std::vector<int32_t> tokens_;       // [n_tokens] ids, grouped by node
  int32_t max_depth_ = 0;
};

}  // namespace tangram
