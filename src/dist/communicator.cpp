#include "llmcc/dist/communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "llmcc/error.h"

#if LLMCC_HAVE_MPI
#include <mpi.h>
#endif

namespace llmcc::dist {

bool built_with_mpi() { return LLMCC_HAVE_MPI != 0; }

bool launched_by_mpi() {
  // Open MPI's mpirun and PMIx launchers (srun, prterun) set these in every rank's environment.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

Communicator& world() {
  static Communicator comm;
  return comm;
}

std::string Communicator::describe() const { return "rank " + std::to_string(rank_) + " of " + std::to_string(size_); }

double Communicator::sum(double value) {
  sum(&value, 1);
  return value;
}

#if LLMCC_HAVE_MPI

namespace {

static_assert(sizeof(MPI_Request) <= sizeof(std::uintptr_t), "an MPI_Request must fit a Request's handle");

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("mpi", std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

MPI_Request unwrap(std::uintptr_t bits) {
  MPI_Request r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

std::uintptr_t wrap(MPI_Request r) {
  std::uintptr_t bits = 0;
  std::memcpy(&bits, &r, sizeof r);
  return bits;
}

}  // namespace

Communicator::Communicator() {
  if (!launched_by_mpi()) return;
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    // Only the main thread calls MPI (OpenMP's workers never do).
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // The ranks that share this machine's memory; all of them, or memory cannot be shared.
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  int everywhere = node_size == size_ ? 1 : 0;
  check(MPI_Allreduce(MPI_IN_PLACE, &everywhere, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), "MPI_Allreduce");
  one_node_ = everywhere != 0;
}

Communicator::~Communicator() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (mpi_ && !finalised) MPI_Finalize();
}

std::string Communicator::transport() const {
  if (!mpi_) return "one process";
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string v(version, static_cast<std::size_t>(length));
  if (const std::size_t comma = v.find(','); comma != std::string::npos) v.resize(comma);
  return "MPI (" + v + ")";
}

void Communicator::sum(double* values, int count) {
  if (size_ == 1) return;
  check(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
}

bool Communicator::all(bool value) {
  if (size_ == 1) return value;
  int v = value ? 1 : 0;
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), "MPI_Allreduce");
  return v != 0;
}

void Communicator::broadcast(void* bytes, std::size_t count, int root) {
  if (size_ == 1) return;
  auto* p = static_cast<char*>(bytes);
  // MPI counts are int: large buffers go in pieces.
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  for (std::size_t done = 0; done < count; done += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, count - done));
    check(MPI_Bcast(p + done, n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

void Communicator::barrier() {
  if (size_ == 1) return;
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

Request Communicator::start_allreduce(float* data, std::size_t count) {
  Request out;
  if (size_ == 1) return out;
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r),
        "MPI_Iallreduce");
  out.handle_ = wrap(r);
  out.pending_ = true;
  return out;
}

Request Communicator::start_reduce_scatter(const float* data, float* out_part, const int* counts) {
  Request out;
  if (size_ == 1) {
    std::memcpy(out_part, data, static_cast<std::size_t>(counts[0]) * sizeof(float));
    return out;
  }
  MPI_Request r;
  check(MPI_Ireduce_scatter(data, out_part, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r), "MPI_Ireduce_scatter");
  out.handle_ = wrap(r);
  out.pending_ = true;
  return out;
}

Request Communicator::start_allgather(float* data, const int* counts, const int* displacements) {
  Request out;
  if (size_ == 1) return out;
  MPI_Request r;
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, counts, displacements, MPI_FLOAT, MPI_COMM_WORLD, &r),
        "MPI_Iallgatherv");
  out.handle_ = wrap(r);
  out.pending_ = true;
  return out;
}

bool Communicator::test(Request& request) {
  if (!request.pending_) return true;
  MPI_Request r = unwrap(request.handle_);
  int done = 0;
  check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test");
  request.handle_ = wrap(r);
  if (done) request.pending_ = false;
  return done != 0;
}

void Communicator::wait(Request& request) {
  if (!request.pending_) return;
  MPI_Request r = unwrap(request.handle_);
  check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  request.handle_ = wrap(r);
  request.pending_ = false;
}

void Communicator::gather(const float* part, float* data, const int* counts, const int* displacements, int root) {
  if (size_ == 1) {
    std::memcpy(data + displacements[0], part, static_cast<std::size_t>(counts[0]) * sizeof(float));
    return;
  }
  check(MPI_Gatherv(part, counts[rank_], MPI_FLOAT, data, counts, displacements, MPI_FLOAT, root, MPI_COMM_WORLD),
        "MPI_Gatherv");
}

void Communicator::abort(int code) {
  if (mpi_ || size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

namespace {
void* allocate_pages(std::size_t bytes) {
  void* p = std::aligned_alloc(4096, std::max<std::size_t>((bytes + 4095) / 4096 * 4096, 4096));
  if (p == nullptr) fail("dist", "could not allocate " + std::to_string(bytes) + " bytes");
  return p;
}
}  // namespace

NodeSharedMemory::NodeSharedMemory(Communicator& comm, std::size_t bytes) {
  if (!comm.one_node()) fail("mpi", "shared memory needs every rank on one machine");
  if (!comm.distributed()) {  // one rank: its own memory
    own_.push_back(allocate_pages(bytes));
    bases_ = own_;
    return;
  }
  void* mine = nullptr;
  MPI_Win win;
  MPI_Info info;
  MPI_Info_create(&info);
  // Each rank's part on its own pages (not packed after the previous rank's).
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  // A rank's part need not start on a cache line: 64 bytes more, and each base aligned up.
  const int code = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes + 64), 1, info, MPI_COMM_WORLD, &mine, &win);
  MPI_Info_free(&info);
  check(code, "MPI_Win_allocate_shared");
  static_assert(sizeof(MPI_Win) <= sizeof(std::uintptr_t), "an MPI_Win must fit the handle");
  std::memcpy(&window_, &win, sizeof win);
  bases_.resize(static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* base = nullptr;
    check(MPI_Win_shared_query(win, r, &size, &unit, &base), "MPI_Win_shared_query");
    const auto at = reinterpret_cast<std::uintptr_t>(base);
    bases_[static_cast<std::size_t>(r)] = reinterpret_cast<void*>((at + 63) / 64 * 64);
  }
}

NodeSharedMemory::~NodeSharedMemory() {
  for (void* p : own_) std::free(p);
  if (!own_.empty()) return;
  MPI_Win win;
  std::memcpy(&win, &window_, sizeof win);
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Win_free(&win);
}

#else  // one process without MPI: every collective is the identity

Communicator::Communicator() = default;
Communicator::~Communicator() = default;
std::string Communicator::transport() const { return "one process"; }
void Communicator::sum(double*, int) {}
bool Communicator::all(bool value) { return value; }
void Communicator::broadcast(void*, std::size_t, int) {}
void Communicator::barrier() {}
Request Communicator::start_allreduce(float*, std::size_t) { return {}; }
Request Communicator::start_reduce_scatter(const float* data, float* out_part, const int* counts) {
  std::memcpy(out_part, data, static_cast<std::size_t>(counts[0]) * sizeof(float));
  return {};
}
Request Communicator::start_allgather(float*, const int*, const int*) { return {}; }
bool Communicator::test(Request&) { return true; }
void Communicator::wait(Request&) {}
void Communicator::gather(const float* part, float* data, const int* counts, const int* displacements, int) {
  std::memcpy(data + displacements[0], part, static_cast<std::size_t>(counts[0]) * sizeof(float));
}
void Communicator::abort(int code) { std::exit(code); }

NodeSharedMemory::NodeSharedMemory(Communicator&, std::size_t bytes) {
  own_.push_back(std::aligned_alloc(4096, std::max<std::size_t>((bytes + 4095) / 4096 * 4096, 4096)));
  if (own_[0] == nullptr) fail("dist", "could not allocate " + std::to_string(bytes) + " bytes");
  bases_ = own_;
}

NodeSharedMemory::~NodeSharedMemory() {
  for (void* p : own_) std::free(p);
}

#endif

}  // namespace llmcc::dist
