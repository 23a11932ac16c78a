// tjc train: its options; the demo is the bench library's (src/bench/train_demo.h).
#include <memory>

#include "bench/train_demo.h"
#include "tjc/common.h"

namespace tjc {

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainOptions>();
  auto* c = app.add_subcommand("train", "train the tiny Llama as a character-level language model with a compiled training step");
  c->add_option("--text", a->text, "text files to learn (default: README.md and docs/*.md here)");
  c->add_option("--steps", a->steps, "training steps")->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  c->add_option("--batch", a->batch, "sequences per step")->check(CLI::Range(int64_t{1}, int64_t{1024}));
  c->add_option("--seq", a->seq, "tokens (bytes) per sequence")->check(CLI::Range(int64_t{2}, int64_t{511}));
  c->add_option("--layers", a->layers, "decoder layers")->check(CLI::Range(int64_t{1}, int64_t{64}));
  c->add_option("--lr", a->lr, "peak learning rate (AdamW; linear warmup, cosine decay)")->check(finite_range(0, 10));
  c->add_option("--warmup", a->warmup, "warmup steps")->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  c->add_option("--seed", a->seed, "seed of the weights, the batches and the sampling")->check(seed_check());
  c->add_option("--svg", a->svg, "write the loss curve here (empty: none)");
  c->add_option("--sample", a->sample, "characters to sample after training")->check(CLI::Range(int64_t{0}, int64_t{100000}));
  c->add_option("--prompt", a->prompt, "text the sample starts from");
  c->add_option("--temperature", a->temperature, "sampling temperature")->check(finite_range(0.01, 10));
  c->add_flag("--json", a->json, "print a JSON summary (with every step's loss)");
  c->callback([a] { run_train_demo(*a); });
}

}  // namespace tjc
