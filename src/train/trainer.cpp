#include "compiler/compile.h"
#include "train/trainer.h"

#include <utility>

#include "tensorjit/error.h"

namespace tj {

namespace {

CompileOptions donating(const CompileOptions& co, const TrainStep& s) {
  CompileOptions r = co;
  r.donate = s.donate;
  return r;
}

}  // namespace

Trainer::Trainer(const Graph& loss, const Bindings& params, const OptimizerConfig& o, const CompileOptions& co)
    : step_(training_step(loss, o)), exe_(tj::compile(step_.graph, {}, donating(co, step_))) {
  for (size_t k = 0; k < step_.params.size(); ++k) {
    const std::string& name = step_.params[k];
    auto it = params.find(name);
    if (it == params.end()) throw Error("Trainer: no initial value for param '" + name + "'");
    const Type& t = step_.graph.type(step_.graph.find(name));
    const NDArray& w = it->second;
    if (w.dtype() != t.dtype || w.shape() != eval_shape(t.shape, {}))
      throw Error("Trainer: param '" + name + "' is " + w.type_str() + ", the model wants " + t.str());
    in_[name] = NDArray::copy_of(w.dtype(), w.shape(), w.raw(), w.nbytes());  // the trainer's own
    carried_.push_back(name);
    for (const std::string& s : step_.state[k]) {
      in_[s] = NDArray(w.dtype(), w.shape());  // zeros
      carried_.push_back(s);
    }
  }
  const std::vector<int>& alias = exe_.output_aliases();
  for (size_t i = 0; i < carried_.size(); ++i) {
    in_place_.push_back(alias[i + 1] >= 0);
    int64_t bytes = static_cast<int64_t>(in_.at(carried_[i]).nbytes());
    state_bytes_ += bytes;
    if (in_place_.back()) in_place_bytes_ += bytes;
  }
}

double Trainer::step(Bindings& batch, double lr) {
  for (auto& [k, v] : batch) {
    if (in_.count(k)) throw Error("Trainer: batch input '" + k + "' is a param or optimizer state");
    in_[k] = std::move(v);
  }
  auto give_back = [&] {  // the batch's arrays (a donated cache was written)
    for (auto& [k, v] : batch) v = std::move(in_[k]), in_.erase(k);
  };
  in_["lr"] = NDArray::scalar(DType::f32, lr);
  in_["step"] = NDArray::scalar(DType::f32, static_cast<double>(steps_ + 1));
  RunOptions ro;
  ro.copy_donated_outputs = false;  // updated in place: nothing to copy
  try {
    exe_.run(in_, out_, ro);
  } catch (...) {
    give_back();
    throw;
  }
  give_back();
  ++steps_;
  // The new params and state not written in place become the inputs; the old
  // arrays are the next step's outputs (same shapes: run reuses them).
  for (size_t i = 0; i < carried_.size(); ++i)
    if (!in_place_[i]) std::swap(in_[carried_[i]], out_[i + 1]);
  return out_[0].get(0);
}

Bindings Trainer::params() const {
  Bindings r;
  for (const std::string& p : step_.params) r.emplace(p, in_.at(p));
  return r;
}

}  // namespace tj
