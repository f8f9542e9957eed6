#include "cli/sampling_flags.h"

#include <CLI/CLI.hpp>

namespace tangram::cli {

void add_sampling_options(CLI::App* c, SamplingParams& s) {
  c->add_option("--temp,--temperature", s.temperature, "Sampling temperature; 0 = greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--top-k", s.top_k, "Keep the k most likely tokens; 0 = off")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--top-p", s.top_p, "Nucleus sampling mass; 1 = off")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--min-p", s.min_p, "Keep tokens with p >= min_p * p_max; 0 = off")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--repeat-penalty", s.repetition_penalty,
                "Repetition penalty (CTRL style); 1 = off")
      ->capture_default_str();
  c->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty [-2, 2]")
      ->capture_default_str();
  c->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty [-2, 2]")
      ->capture_default_str();
  c->add_option("--penalty-last-n", s.penalty_last_n,
                "Tokens the penalties look back over; -1 = all")
      ->capture_default_str();
  c->add_option_function<uint64_t>(
      "--seed",
      [&s](const uint64_t& v) {
        s.seed = v;
        s.seed_set = true;
      },
      "Random seed (default: random, printed at the end)");
  c->add_option("--stop", s.stop, "Stop string (repeatable)");
  c->add_flag("--ignore-eos", s.ignore_eos, "Keep generating past end-of-generation tokens");
}

}  // namespace tangram::cli
