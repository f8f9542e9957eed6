#include "evaluation/planted_facts.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cctype>

namespace tangram {

namespace {

// splitmix64: a tiny RNG with the same output on every platform (the standard distributions
// are implementation-defined, which would make conversations differ between libraries).
class FactRng {
 public:
  explicit FactRng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n >= 1 (modulo bias below 2^-50 for the sizes used here).
  size_t below(size_t n) { return static_cast<size_t>(next() % static_cast<uint64_t>(n)); }
  template <typename T, size_t N>
  const T& pick(const std::array<T, N>& a) {
    return a[below(N)];
  }

 private:
  uint64_t state_;
};

// A shuffled list of 0 .. n-1 (Fisher-Yates).
std::vector<size_t> shuffled(size_t n, FactRng& rng) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  for (size_t i = n; i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
  return v;
}

// --- Filler: storybook sentences. None of these words is a fact subject, name or place. ---
constexpr std::array<std::string_view, 12> kFillerSubjects = {
    "the old miller",      "a small grey cat", "the village baker",     "an old sailor",
    "the tired farmer",    "a young shepherd", "the quiet weaver",      "the schoolmaster",
    "a travelling tinker", "the ferryman",     "the parson's daughter", "a flock of geese"};
constexpr std::array<std::string_view, 12> kFillerVerbs = {
    "walked slowly along",     "looked out across",   "rested for a while beside",
    "sang softly near",        "waited patiently by", "wandered through",
    "told a long story about", "swept the path to",   "carried a basket past",
    "dreamed once more of",    "hurried home across", "stopped to admire"};
constexpr std::array<std::string_view, 12> kFillerPlaces = {
    "the stone bridge", "the windmill on the hill", "the muddy lane",    "the apple orchard",
    "the frozen pond",  "the harbour wall",         "the little chapel", "the meadow of clover",
    "the dark wood",    "the market square",        "the river meadows", "the churchyard elms"};
constexpr std::array<std::string_view, 10> kFillerTimes = {"at dawn",
                                                           "before supper",
                                                           "in the pouring rain",
                                                           "while the bells rang",
                                                           "as the sun went down",
                                                           "on a windy morning",
                                                           "late in the autumn",
                                                           "after the harvest",
                                                           "when the snow came",
                                                           "in the long summer evenings"};
constexpr std::array<std::string_view, 8> kFillerLooks = {
    "bright", "peaceful", "lonely", "busy", "green", "still", "cheerful", "grand"};
constexpr std::array<std::string_view, 4> kFillerSeasons = {"winter", "spring", "summer",
                                                            "harvest"};
constexpr std::array<std::string_view, 6> kFillerWeathers = {"mild",  "wet",  "long",
                                                             "merry", "cold", "dry"};

// --- Fact material ---
constexpr std::array<std::string_view, 12> kSubjectAdjectives = {
    "blue",  "copper", "silver",  "crimson", "iron",  "amber",
    "ivory", "jade",   "scarlet", "golden",  "oaken", "marble"};
constexpr std::array<std::string_view, 12> kSubjectThings = {
    "lantern", "gate",   "key",    "chest",  "bell", "compass",
    "clock",   "ledger", "kettle", "banner", "door", "tower"};
static_assert(kSubjectAdjectives.size() * kSubjectThings.size() == kMaxPlantedFacts);
constexpr std::array<std::string_view, 16> kFirstNames = {
    "Marigold", "Tobias",  "Rosalind", "Ambrose",  "Winifred",  "Cedric", "Eleanor", "Jasper",
    "Philippa", "Barnaby", "Octavia",  "Percival", "Henrietta", "Silas",  "Beatrix", "Leopold"};
constexpr std::array<std::string_view, 16> kLastNames = {
    "Thornby",  "Ashcombe", "Pennyworth", "Blackmore", "Fairweather", "Hollis",
    "Wexley",   "Drummond", "Kettleby",   "Marlowe",   "Quillon",     "Radcliffe",
    "Stanhope", "Tillman",  "Underhill",  "Yardley"};
constexpr std::array<std::string_view, 16> kPlaceStarts = {
    "Eld", "Brack", "Corr", "Dun",  "Fen",  "Gild", "Harl", "Ivel",
    "Kes", "Lorn",  "Mir",  "Norl", "Pell", "Ros",  "Stav", "Wyn"};
constexpr std::array<std::string_view, 10> kPlaceEnds = {"moor", "wick", "haven", "stead", "ford",
                                                         "mere", "holt", "combe", "bury",  "dale"};
static_assert(kFirstNames.size() * kLastNames.size() >= kMaxPlantedFacts);
static_assert(kPlaceStarts.size() * kPlaceEnds.size() >= kMaxPlantedFacts);

enum class FactKind { Name, Number, Place };

struct Fact {
  FactKind kind;
  std::string subject;  // "iron gate"
  std::string value;    // "Marigold Thornby" | "4817" | "Eldwick"
};

std::string capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

int64_t count_words(std::string_view s) {
  int64_t n = 0;
  bool in_word = false;
  for (const char c : s) {
    const bool space = c == ' ';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

std::string filler_sentence(FactRng& rng) {
  switch (rng.below(3)) {
    case 0:
      return capitalized(fmt::format("{} {} {} {}.", rng.pick(kFillerSubjects),
                                     rng.pick(kFillerVerbs), rng.pick(kFillerPlaces),
                                     rng.pick(kFillerTimes)));
    case 1:
      return capitalized(fmt::format("{} said that {} had never looked so {}.",
                                     rng.pick(kFillerSubjects), rng.pick(kFillerPlaces),
                                     rng.pick(kFillerLooks)));
    default:
      return fmt::format("Nobody in the parish could remember a {} so {}.",
                         rng.pick(kFillerSeasons), rng.pick(kFillerWeathers));
  }
}

// Whole sentences until at least `words` words (empty for words <= 0).
std::string filler(FactRng& rng, int words) {
  std::string out;
  int64_t have = 0;
  while (have < words) {
    std::string s = filler_sentence(rng);
    have += count_words(s);
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

std::string fact_sentence(const Fact& f) {
  switch (f.kind) {
    case FactKind::Name:
      return fmt::format("Please remember this: the keeper of the {} is named {}.", f.subject,
                         f.value);
    case FactKind::Number:
      return fmt::format("Please remember this: the number painted on the {} is {}.", f.subject,
                         f.value);
    case FactKind::Place:
      return fmt::format("Please remember this: the {} was made in a town called {}.", f.subject,
                         f.value);
  }
  return {};
}

std::string question(const Fact& f) {
  switch (f.kind) {
    case FactKind::Name:
      return fmt::format("What is the name of the keeper of the {}? Answer with the name only.",
                         f.subject);
    case FactKind::Number:
      return fmt::format("What number is painted on the {}? Answer with the number only.",
                         f.subject);
    case FactKind::Place:
      return fmt::format("In which town was the {} made? Answer with the name of the town only.",
                         f.subject);
  }
  return {};
}

std::vector<Fact> make_facts(FactRng& rng, int n) {
  const std::vector<size_t> subjects = shuffled(kMaxPlantedFacts, rng);
  const std::vector<size_t> names = shuffled(kFirstNames.size() * kLastNames.size(), rng);
  const std::vector<size_t> places = shuffled(kPlaceStarts.size() * kPlaceEnds.size(), rng);
  std::vector<Fact> facts;
  std::vector<std::string> numbers_used;
  size_t next_name = 0, next_place = 0;
  for (int i = 0; i < n; ++i) {
    Fact f;
    const size_t s = subjects[static_cast<size_t>(i)];
    f.subject = fmt::format("{} {}", kSubjectAdjectives[s / kSubjectThings.size()],
                            kSubjectThings[s % kSubjectThings.size()]);
    f.kind = static_cast<FactKind>(rng.below(3));
    switch (f.kind) {
      case FactKind::Name: {
        const size_t k = names[next_name++];
        f.value = fmt::format("{} {}", kFirstNames[k / kLastNames.size()],
                              kLastNames[k % kLastNames.size()]);
        break;
      }
      case FactKind::Number:
        do {
          f.value = std::to_string(1000 + rng.below(99000));  // 1000 .. 99999
        } while (std::find(numbers_used.begin(), numbers_used.end(), f.value) !=
                 numbers_used.end());
        numbers_used.push_back(f.value);
        break;
      case FactKind::Place: {
        const size_t k = places[next_place++];
        f.value = fmt::format("{}{}", kPlaceStarts[k / kPlaceEnds.size()],
                              kPlaceEnds[k % kPlaceEnds.size()]);
        break;
      }
    }
    facts.push_back(std::move(f));
  }
  return facts;
}

bool is_word_char(unsigned char c) { return std::isalnum(c) != 0 || c >= 0x80; }

}  // namespace

int64_t PlantedConversation::n_questions() const {
  return std::count_if(expected_answers.begin(), expected_answers.end(),
                       [](const std::string& e) { return !e.empty(); });
}

PlantedConversation make_planted_conversation(uint64_t seed, int n_facts,
                                              int filler_words_between) {
  PlantedConversation conv;
  const int n = std::min(n_facts, kMaxPlantedFacts);
  if (n <= 0) return conv;
  const int words = std::max(filler_words_between, 0);
  FactRng rng(seed);
  const std::vector<Fact> facts = make_facts(rng, n);
  std::vector<bool> asked(facts.size(), false);
  auto add = [&conv](std::string turn, std::string expected) {
    conv.user_turns.push_back(std::move(turn));
    conv.expected_answers.push_back(std::move(expected));
  };
  auto ask = [&](size_t i) {
    asked[i] = true;
    add(question(facts[i]), facts[i].value);
  };
  for (size_t k = 0; k < facts.size(); ++k) {
    std::string turn = filler(rng, words);
    if (!turn.empty()) turn += ' ';
    add(turn + fact_sentence(facts[k]), "");
    // Now and then, ask about an earlier fact (never the one just planted).
    if (k >= 1 && rng.below(2) == 0) {
      std::vector<size_t> open;
      for (size_t j = 0; j < k; ++j)
        if (!asked[j]) open.push_back(j);
      if (!open.empty()) ask(open[rng.below(open.size())]);
    }
  }
  add(filler(rng, std::max(words, 1)), "");
  for (const size_t i : shuffled(facts.size(), rng))
    if (!asked[i]) ask(i);
  return conv;
}

std::string normalize_for_match(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_word_char(c)) {
      out += static_cast<char>(std::tolower(c));
      continue;
    }
    // "4,817", "3.5" and "Lily's" stay one word.
    const bool joiner = c == ',' || c == '.' || c == '\'';
    if (joiner && i > 0 && i + 1 < text.size() &&
        is_word_char(static_cast<unsigned char>(text[i - 1])) &&
        is_word_char(static_cast<unsigned char>(text[i + 1])))
      continue;
    if (!out.empty() && out.back() != ' ') out += ' ';
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool exact_match(std::string_view answer, std::string_view expected) {
  const std::string want = normalize_for_match(expected);
  if (want.empty()) return false;
  // Both padded with one space, so a match starts and ends at word boundaries.
  std::string have(1, ' '), needle(1, ' ');
  have.append(normalize_for_match(answer)).push_back(' ');
  needle.append(want).push_back(' ');
  return have.find(needle) != std::string::npos;
}

}  // namespace tangram
