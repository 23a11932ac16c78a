// tjc train: the tiny Llama trained as a character-level language model on
// text files (by default the project's own README.md and docs/*.md) with a
// compiled training step (forward, backward, AdamW: src/train), printing
// the loss, tokens/s and the compile time; then a picture of the loss
// curve, and text sampled from the trained model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tj::bench {

struct TrainOptions {
  std::vector<std::string> text;
  int64_t steps = 600, batch = 8, seq = 64, layers = 2, warmup = 20, sample = 300;
  double lr = 3e-3, temperature = 0.8;
  uint64_t seed = 0;
  std::string svg = "train_loss.svg", prompt = "The compiler ";
  bool json = false;
};

void run_train_demo(const TrainOptions& o);

}  // namespace tj::bench
