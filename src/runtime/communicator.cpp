#include "runtime/communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

namespace tj {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::all_to_all: return "all_to_all";
    case CollectiveOp::barrier: return "barrier";
  }
  return "?";
}

namespace {

float combine(float a, float b, Reduction r) {
  switch (r) {
    case Reduction::sum: return a + b;
    case Reduction::max:  // NaN wins, the first in rank order, as amax
      return a != a ? a : b != b ? b : b > a ? b : a;
    case Reduction::min:
      return a != a ? a : b != b ? b : b < a ? b : a;
  }
  return a;
}

// Block `block` (n floats) of every rank's contribution of `stride` floats,
// reduced in rank order into out.
void reduce_blocks(const float* all, int size, int64_t stride, int64_t block, int64_t n, Reduction r, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float acc = all[block * n + i];
    for (int k = 1; k < size; ++k) acc = combine(acc, all[k * stride + block * n + i], r);
    out[i] = acc;
  }
}

}  // namespace

std::string Communicator::history_str() const {
  std::string s;
  for (const CollectiveRecord& h : history_)
    s += "  #" + std::to_string(h.seq) + " " + collective_op_name(h.op) + " of " + std::to_string(h.floats) + " floats" + (h.done ? "" : " (not done)") + "\n";
  return s;
}

void Communicator::run(CollectiveOp op, const float* in, int64_t floats, float* all) {
  const uint64_t seq = ++seq_;
  history_.push_back({seq, op, floats, false});
  if (history_.size() > kHistory) history_.pop_front();
  try {
    exchange(op, seq, in, floats, all);
  } catch (const CommError& e) {
    throw CommError(std::string(e.what()) + "\nlast collectives of rank " + std::to_string(rank()) + ", oldest first:\n" + history_str());
  }
  history_.back().done = true;
}

void Communicator::all_reduce(float* data, int64_t n, Reduction r) {
  std::vector<float> all(static_cast<size_t>(size() * n));
  run(CollectiveOp::all_reduce, data, n, all.data());
  reduce_blocks(all.data(), size(), n, 0, n, r, data);
}

void Communicator::all_gather(const float* in, int64_t n, float* out) { run(CollectiveOp::all_gather, in, n, out); }

void Communicator::reduce_scatter(const float* in, int64_t n, float* out, Reduction r) {
  const int64_t stride = size() * n;
  std::vector<float> all(static_cast<size_t>(size() * stride));
  run(CollectiveOp::reduce_scatter, in, stride, all.data());
  reduce_blocks(all.data(), size(), stride, rank(), n, r, out);
}

void Communicator::all_to_all(const float* in, int64_t n, float* out) {
  const int64_t stride = size() * n;
  std::vector<float> all(static_cast<size_t>(size() * stride));
  run(CollectiveOp::all_to_all, in, stride, all.data());
  for (int k = 0; k < size(); ++k) std::memcpy(out + k * n, all.data() + k * stride + rank() * n, static_cast<size_t>(n) * sizeof(float));
}

void Communicator::barrier() { run(CollectiveOp::barrier, nullptr, 0, nullptr); }

// ---- LocalGroup ----------------------------------------------------------

// One round per collective, two barriers: every rank arrives with its
// input (then each copies all of them), and every rank is done reading
// (then the inputs may change). Generation numbers tell the rounds apart.
struct LocalGroup::State {
  std::mutex mu;
  std::condition_variable cv;
  int size;
  std::chrono::milliseconds timeout;
  std::vector<bool> gone;
  std::optional<std::string> broken;  // a round that failed: every later call fails too
  uint64_t arrive_gen = 0, read_gen = 0;
  int arrived = 0, read = 0;
  std::vector<bool> here, done_reading;
  struct Call {
    CollectiveOp op;
    uint64_t seq;
    int64_t floats;
    const float* in;
  };
  std::vector<Call> calls;

  State(int n, std::chrono::milliseconds t) : size(n), timeout(t), gone(n, false), here(n, false), done_reading(n, false), calls(n) {}

  // Rank `me` has come: the last of them resets the count and flags and
  // moves `gen` on; the others wait for that.
  void meet(std::unique_lock<std::mutex>& lock, int& count, std::vector<bool>& flags, uint64_t& gen, size_t me, const std::string& what) {
    flags[me] = true;
    const uint64_t seen = gen;
    if (++count == size) {
      count = 0;
      std::fill(flags.begin(), flags.end(), false);
      ++gen;
      cv.notify_all();
    } else {
      wait(lock, gen, seen, flags, what);
    }
  }
  // Waits for `gen` to move past `seen`; the ranks not yet `flag`ged are
  // the ones waited for. Throws the round's error on timeout or a rank gone.
  void wait(std::unique_lock<std::mutex>& lock, const uint64_t& gen, uint64_t seen, const std::vector<bool>& flag, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto missing = [&] {
      std::string s;
      for (int k = 0; k < size; ++k)
        if (!flag[static_cast<size_t>(k)]) s += (s.empty() ? "" : ", ") + std::to_string(k);
      return s;
    };
    auto left = [&] {
      for (int k = 0; k < size; ++k)
        if (gone[static_cast<size_t>(k)] && !flag[static_cast<size_t>(k)]) return k;
      return -1;
    };
    for (;;) {
      if (gen != seen) return;
      if (broken) throw CommError(what + ": " + *broken);
      if (const int k = left(); k >= 0) {
        broken = "rank " + std::to_string(k) + " left the group";
        cv.notify_all();
        throw CommError(what + ": " + *broken);
      }
      if (cv.wait_until(lock, deadline) == std::cv_status::timeout && gen == seen) {
        broken = "timed out after " + std::to_string(timeout.count()) + " ms waiting for rank(s) " + missing();
        cv.notify_all();
        throw CommError(what + ": " + *broken);
      }
    }
  }
};

namespace {

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup::State> s, int r) : s_(std::move(s)), rank_(r) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }

 protected:
  void exchange(CollectiveOp op, uint64_t seq, const float* in, int64_t floats, float* all) override {
    LocalGroup::State& s = *s_;
    const size_t me = static_cast<size_t>(rank_);
    const std::string what = std::string(collective_op_name(op)) + " #" + std::to_string(seq) + " on rank " + std::to_string(rank_) + " of " +
                             std::to_string(s.size);
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.broken) throw CommError(what + ": " + *s.broken);
    s.calls[me] = {op, seq, floats, in};
    s.meet(lock, s.arrived, s.here, s.arrive_gen, me, what);
    for (int k = 0; k < s.size; ++k) {
      const LocalGroup::State::Call& c = s.calls[static_cast<size_t>(k)];
      if (c.op != op || c.seq != seq || c.floats != floats) {
        s.broken = "rank " + std::to_string(k) + " called " + collective_op_name(c.op) + " #" + std::to_string(c.seq) + " of " + std::to_string(c.floats) +
                   " floats where rank " + std::to_string(rank_) + " called " + collective_op_name(op) + " #" + std::to_string(seq) + " of " +
                   std::to_string(floats);
        s.cv.notify_all();
        throw CommError(what + ": " + *s.broken);
      }
      if (floats > 0) std::memcpy(all + k * floats, c.in, static_cast<size_t>(floats) * sizeof(float));
    }
    s.meet(lock, s.read, s.done_reading, s.read_gen, me, what);
  }

 private:
  std::shared_ptr<LocalGroup::State> s_;
  int rank_;
};

}  // namespace

LocalGroup::LocalGroup(int size, std::chrono::milliseconds timeout) {
  if (size < 1 || size > 4096) throw Error("LocalGroup: " + std::to_string(size) + " ranks (1 to 4096)");
  state_ = std::make_shared<State>(size, timeout);
}

LocalGroup::~LocalGroup() = default;

std::unique_ptr<Communicator> LocalGroup::rank(int r) {
  if (r < 0 || r >= state_->size) throw Error("LocalGroup: no rank " + std::to_string(r) + " in a group of " + std::to_string(state_->size));
  return std::make_unique<LocalCommunicator>(state_, r);
}

void LocalGroup::leave(int r) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->gone.at(static_cast<size_t>(r)) = true;
  state_->cv.notify_all();
}

int LocalGroup::size() const { return state_->size; }

}  // namespace tj
