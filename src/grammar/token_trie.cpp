#include "grammar/token_trie.h"

#include <algorithm>

namespace tangram {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> ids) {
  const auto piece = [&](int32_t id) -> const std::string& {
    return pieces[static_cast<size_t>(id)];
  };
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return piece(a) < piece(b); });
  // Sorted by bytes, each token extends the path of the one before past their common prefix;
  // open[d] is the node at depth d on the current path, still waiting for its subtree's end.
  std::vector<int32_t> open{0};
  byte_.push_back(0);
  depth_.push_back(0);
  end_.push_back(0);
  first_token_.push_back(0);
  const std::string* before = nullptr;
  for (int32_t id : ids) {
    const std::string& p = piece(id);
    size_t shared = 0;
    if (before != nullptr)
      shared = static_cast<size_t>(
          std::mismatch(before->begin(), before->end(), p.begin(), p.end()).first -
          before->begin());
    while (open.size() > shared + 1) {
      end_[static_cast<size_t>(open.back())] = size();
      open.pop_back();
    }
    for (size_t d = shared; d < p.size(); ++d) {
      open.push_back(size());
      byte_.push_back(static_cast<uint8_t>(p[d]));
      depth_.push_back(static_cast<int32_t>(d + 1));
      end_.push_back(0);
      first_token_.push_back(static_cast<int32_t>(tokens_.size()));
    }
    // The token's node is the newest one: a token equal to the one before shares its node, and
    // one that is a prefix of others comes before them.
    tokens_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(p.size()));
    before = &p;
  }
  for (int32_t node : open) end_[static_cast<size_t>(node)] = size();
  first_token_.push_back(static_cast<int32_t>(tokens_.size()));
}

}  // namespace tangram
