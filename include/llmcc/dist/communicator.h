// Communicator: the processes of a data-parallel run and the collectives training needs.
//
// `mpirun -np N program ...` starts N processes (ranks); llmcc::dist::world() is the run's
// communicator over all of them, made on first use: with MPI (the build option LLMCC_MPI, on by
// default) and a process that an MPI launcher started, MPI_COMM_WORLD; otherwise a communicator of
// one rank whose collectives copy nothing, so a program runs as one process without MPI.
//
//   dist::Communicator& comm = dist::world();
//   loss = comm.sum(loss) / comm.size();           // small, blocking
//   dist::Request r = comm.start_allreduce(g, n);  // large, non-blocking, in place
//   ... more work ...; comm.wait(r);
//
// Every collective must be called by every rank in the same order (MPI's rule). Floats are
// summed; the order of the summation is MPI's and may differ from one process's, so results agree
// with a one-process run to float rounding, not bit for bit.
//
// Failures: an MPI error, or the death of another rank, ends the whole job (MPI's default
// handler, and mpirun stops the other ranks); abort() ends it from one rank after an error that
// rank found, so no rank waits forever in a collective for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llmcc::dist {

// A non-blocking collective in flight (pending() until a wait or a successful test).
class Request {
 public:
  bool pending() const { return pending_; }

 private:
  friend class Communicator;
  std::uintptr_t handle_ = 0;  // an MPI_Request's bits
  bool pending_ = false;
};

class Communicator {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }
  // Whether every rank runs on this machine (MPI_COMM_TYPE_SHARED: they can share memory).
  bool one_node() const { return one_node_; }
  // "rank 1 of 2" for messages.
  std::string describe() const;
  // What carries the collectives: "MPI (Open MPI v4.1.4)", or "one process".
  std::string transport() const;

  // Blocking collectives on a few values.
  double sum(double value);
  bool all(bool value);  // logical and over the ranks
  void sum(double* values, int count);
  void broadcast(void* bytes, std::size_t count, int root);
  void barrier();

  // Non-blocking collectives on float buffers (sum), started now and progressed by test()/wait().
  // allreduce: data (count) in place. reduce_scatter: data holds counts[0] + ... + counts[N-1]
  // floats; rank r receives the sum of its part r into out (counts[r] floats). allgather: in place,
  // rank r's part r of data (counts[r] floats from the sum of the counts before it) goes to every
  // rank. The buffers must stay untouched until the request completes.
  Request start_allreduce(float* data, std::size_t count);
  Request start_reduce_scatter(const float* data, float* out, const int* counts);
  Request start_allgather(float* data, const int* counts, const int* displacements);
  bool test(Request& request);  // true when done (then the request is empty)
  void wait(Request& request);
  // Every rank's part (counts[r] floats at `part`) gathered into root's data at the
  // displacements; data is read only on root (others may pass null).
  void gather(const float* part, float* data, const int* counts, const int* displacements, int root);

  // Ends every rank of the job with exit code `code`; call after printing the error.
  [[noreturn]] void abort(int code);

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

 private:
  friend Communicator& world();
  Communicator();
  ~Communicator();
  int rank_ = 0;
  int size_ = 1;
  bool one_node_ = true;
  bool mpi_ = false;  // MPI was initialised by this communicator
};

// Memory that every rank of a one-node communicator reads and writes: each rank allocates
// bytes_of_this_rank (MPI_Win_allocate_shared) and sees every rank's at base(r), 64-byte aligned.
// Collective: every rank makes it together, and its destructor (also collective) frees it.
class NodeSharedMemory {
 public:
  NodeSharedMemory(Communicator& comm, std::size_t bytes_of_this_rank);
  ~NodeSharedMemory();
  NodeSharedMemory(const NodeSharedMemory&) = delete;
  NodeSharedMemory& operator=(const NodeSharedMemory&) = delete;
  void* base(int rank) const { return bases_.at(static_cast<std::size_t>(rank)); }

 private:
  std::uintptr_t window_ = 0;  // an MPI_Win's bits
  std::vector<void*> bases_;
  std::vector<void*> own_;  // without MPI: the one rank's memory
};

// The run's communicator (made on first use; see above).
Communicator& world();

// Whether this build has MPI (LLMCC_MPI) and whether the process was started by an MPI launcher
// (mpirun's environment), without initialising anything.
bool built_with_mpi();
bool launched_by_mpi();

}  // namespace llmcc::dist
