// Times the collectives that data-parallel training uses on a float
// gradient buffer:
//   allreduce        MPI_Allreduce (in place) of the whole buffer
//   rs+ag            MPI_Reduce_scatter_block + MPI_Allgather (ZeRO-1)
//   iallreduce/B     buffer cut into B-byte buckets, one MPI_Iallreduce per
//                    bucket, all posted then MPI_Waitall (DDP-style buckets)
//   irs+iag/B        per bucket MPI_Ireduce_scatter_block, Waitall, then per
//                    bucket MPI_Iallgather, Waitall
// For each it prints the median and minimum time over the timed iterations
// (each iteration's time is the slowest rank's), the algorithm bandwidth
// bytes/time and the bus bandwidth 2(N-1)/N * bytes/time, which is what
// each rank's link carries in one direction for a ring algorithm, so it can
// be compared with the link rate.
//
// Build: mpicxx -O2 -std=c++20 -o mpi_collectives_bench mpi_collectives_bench.cpp
// Usage: mpi_collectives_bench [--sizes 1M,16M,124439808] [--bucket-mb 16]
//                              [--min-time 2] [--max-iters 20]
// Sizes are float counts; K and M mean 2^10 and 2^20.  The default largest
// size is GPT-2 124M's parameter count.
// Only the C API is used; skip the deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

int rank = 0, nranks = 1;

size_t parse_count(const std::string& s) {
  size_t mult = 1;
  std::string num = s;
  if (!s.empty() && (s.back() == 'M' || s.back() == 'm')) {
    mult = 1u << 20;
    num.pop_back();
  }
  if (!s.empty() && (s.back() == 'K' || s.back() == 'k')) {
    mult = 1u << 10;
    num.pop_back();
  }
  return std::stoull(num) * mult;
}

// Prints each rank's host name and IPv4 addresses, so a run shows where
// its ranks really ran.
void print_placement() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string line = std::string(host) + " pid " + std::to_string(getpid()) + ":";
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      char ip[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, ip, sizeof ip);
      line += std::string(" ") + i->ifa_name + "=" + ip;
    }
    freeifaddrs(ifs);
  }
  char buf[512] = {};
  std::snprintf(buf, sizeof buf, "%s", line.c_str());
  std::vector<char> all(rank == 0 ? sizeof buf * nranks : 0);
  MPI_Gather(buf, sizeof buf, MPI_CHAR, all.data(), sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < nranks; ++r) std::printf("rank %d on %s\n", r, &all[r * sizeof buf]);
}

// Runs op once untimed, then repeats it until min_time seconds have passed
// (at least once, at most max_iters times); returns the per-iteration times
// of the slowest rank, sorted.
std::vector<double> time_op(const std::function<void()>& op, double min_time, int max_iters) {
  op();
  std::vector<double> times;
  double total = 0;
  while (true) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    op();
    double t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(t);
    total += t;
    // Every rank sees the same t, so every rank makes the same decision.
    if (total >= min_time || static_cast<int>(times.size()) >= max_iters) break;
  }
  std::sort(times.begin(), times.end());
  return times;
}

void report(const char* name, size_t bytes, const std::vector<double>& t) {
  if (rank != 0) return;
  double med = t[t.size() / 2], best = t.front();
  double alg = bytes / med / 1e9;
  double bus = alg * 2.0 * (nranks - 1) / nranks;
  std::printf("%10.1f  %-16s %5zu %11.2f %11.2f %9.3f %9.3f %9.2f\n", bytes / 1e6, name, t.size(), med * 1e3,
              best * 1e3, alg, bus, bus * 8);
  std::fflush(stdout);
}

// Checks that every element equals the sum over ranks of (rank+1), i.e.
// that the collective really reduced the buffer.
void check(const std::vector<float>& v, size_t n, const char* what) {
  const float want = nranks * (nranks + 1) / 2.0f;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += v[i] != want;
  if (bad) {
    std::fprintf(stderr, "rank %d: %s wrong in %zu of %zu elements\n", rank, what, bad, n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  std::string sizes = "1M,16M,124439808";
  double bucket_mb = 16, min_time = 2;
  int max_iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--sizes")
      sizes = argv[i + 1];
    else if (a == "--bucket-mb")
      bucket_mb = std::atof(argv[i + 1]);
    else if (a == "--min-time")
      min_time = std::atof(argv[i + 1]);
    else if (a == "--max-iters")
      max_iters = std::atoi(argv[i + 1]);
    else {
      if (rank == 0) std::fprintf(stderr, "unknown option %s\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }

  print_placement();
  if (rank == 0)
    std::printf(
        "ranks %d, bucket %.0f MB, min-time %.1f s, max-iters %d\n"
        "%10s  %-16s %5s %11s %11s %9s %9s %9s\n",
        nranks, bucket_mb, min_time, max_iters, "MB", "case", "iters", "median_ms", "min_ms", "algbw_GBs", "busbw_GBs",
        "busbw_Gbs");

  size_t pos = 0;
  while (pos < sizes.size()) {
    size_t comma = sizes.find(',', pos);
    if (comma == std::string::npos) comma = sizes.size();
    size_t n = parse_count(sizes.substr(pos, comma - pos));
    pos = comma + 1;
    // Reduce_scatter_block needs a multiple of the rank count; so do the
    // buckets, which are also rounded to whole shards.
    n = (n + nranks - 1) / nranks * nranks;
    const size_t bytes = n * sizeof(float);
    size_t bucket = std::max<size_t>(nranks, size_t(bucket_mb * (1 << 20)) / sizeof(float));
    bucket = bucket / nranks * nranks;

    std::vector<float> buf(n), shard(n / nranks);
    auto fill = [&] { std::fill(buf.begin(), buf.end(), float(rank + 1)); };

    fill();
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check(buf, n, "allreduce");
    report("allreduce", bytes,
           time_op([&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
                   min_time, max_iters));

    auto rs_ag = [&] {
      MPI_Reduce_scatter_block(buf.data(), shard.data(), int(n / nranks), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allgather(shard.data(), int(n / nranks), MPI_FLOAT, buf.data(), int(n / nranks), MPI_FLOAT, MPI_COMM_WORLD);
    };
    fill();
    rs_ag();
    check(buf, n, "reduce_scatter+allgather");
    report("rs+ag", bytes, time_op(rs_ag, min_time, max_iters));

    std::vector<MPI_Request> reqs;
    auto iallreduce = [&] {
      reqs.clear();
      for (size_t off = 0; off < n; off += bucket)
        MPI_Iallreduce(MPI_IN_PLACE, buf.data() + off, int(std::min(bucket, n - off)), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD, &reqs.emplace_back());
      MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    };
    fill();
    iallreduce();
    check(buf, n, "bucketed iallreduce");
    std::string name = "iallreduce/" + std::to_string(int(bucket_mb)) + "M";
    report(name.c_str(), bytes, time_op(iallreduce, min_time, max_iters));

    // A bucket's shard of rank r lands at shard[off/nranks ...], and the
    // allgather puts it back at buf[off ...]; n and bucket are multiples of
    // nranks, so every bucket splits evenly.
    auto irs_iag = [&] {
      reqs.clear();
      for (size_t off = 0; off < n; off += bucket)
        MPI_Ireduce_scatter_block(buf.data() + off, shard.data() + off / nranks,
                                  int(std::min(bucket, n - off) / nranks), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                  &reqs.emplace_back());
      MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
      reqs.clear();
      for (size_t off = 0; off < n; off += bucket) {
        int cnt = int(std::min(bucket, n - off) / nranks);
        MPI_Iallgather(shard.data() + off / nranks, cnt, MPI_FLOAT, buf.data() + off, cnt, MPI_FLOAT, MPI_COMM_WORLD,
                       &reqs.emplace_back());
      }
      MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    };
    fill();
    irs_iag();
    check(buf, n, "bucketed reduce_scatter+allgather");
    name = "irs+iag/" + std::to_string(int(bucket_mb)) + "M";
    report(name.c_str(), bytes, time_op(irs_iag, min_time, max_iters));
  }
  MPI_Finalize();
  return 0;
}
