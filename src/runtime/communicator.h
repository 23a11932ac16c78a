// Collectives between the ranks of a program run over a mesh: the runtime
// service the partitioned programs' collective ops call. Every rank calls
// the same collectives in the same order; each call has a sequence number.
//
// Reductions add in rank order (rank 0's block, then 1's, ...), the same
// bits on every rank and on every engine: a program over this
// communicator and one over another engine, or over simulated ranks, agree
// bit for bit.
//
// A collective that does not complete within the timeout, or one a rank
// left (it died, or called another collective in its place), ends on every
// rank that waits with a CommError naming the op, the rank, the sequence
// number and the ranks it waited for, and carries the rank's record of its
// last collectives. Never a hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "ir/sharding.h"
#include "tensorjit/error.h"

namespace tj {

enum class CollectiveOp : uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, barrier };
const char* collective_op_name(CollectiveOp op);

class CommError : public Error {
 public:
  using Error::Error;
};

struct CollectiveRecord {
  uint64_t seq;
  CollectiveOp op;
  int64_t floats;  // per rank, in
  bool done;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data: n floats, reduced over the ranks in place.
  void all_reduce(float* data, int64_t n, Reduction r);
  // in: n floats; out: size*n, rank 0's block first.
  void all_gather(const float* in, int64_t n, float* out);
  // in: size*n floats (block k for rank k); out: n, the reduction of every rank's block rank().
  void reduce_scatter(const float* in, int64_t n, float* out, Reduction r);
  // in: size blocks of n floats (block k for rank k); out: size blocks, block k from rank k.
  void all_to_all(const float* in, int64_t n, float* out);
  void barrier();

  // The last collectives, oldest first (at most kHistory).
  static constexpr size_t kHistory = 16;
  const std::deque<CollectiveRecord>& history() const { return history_; }
  std::string history_str() const;

 protected:
  // One collective: every rank's `in` (floats each) gathered, in rank order,
  // into `all` (size*floats), or a CommError. The engines implement this;
  // the reductions and the block picking are the same for all of them.
  virtual void exchange(CollectiveOp op, uint64_t seq, const float* in, int64_t floats, float* all) = 0;

 private:
  void run(CollectiveOp op, const float* in, int64_t floats, float* all);
  uint64_t seq_ = 0;
  std::deque<CollectiveRecord> history_;
};

// N ranks as threads of one process: the simulated ranks' engine, and the
// tests'. rank(r) is rank r's communicator (one per thread); leave(r)
// marks rank r gone: its peers' waits end with an error.
class LocalGroup {
 public:
  LocalGroup(int size, std::chrono::milliseconds timeout);
  ~LocalGroup();
  std::unique_ptr<Communicator> rank(int r);
  void leave(int r);
  int size() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tj
