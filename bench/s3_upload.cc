// Throughput of an artifact upload (ArtifactUploads: HEAD, then a multipart
// upload in parallel parts read from the file, runner/controller/
// artifact_uploads.h) against `curl -T` of the same file (one signed PUT,
// libcurl's SigV4) to the same S3-compatible server on loopback
// (tests/support/s3_server.py, moto's server with SigV4 authentication).
//
//   bench_s3_upload [SIZE_MIB=128] [RUNS=3] [PART_MIB=16] [PARALLEL=4]
//
// Prints one line per run and the medians' ratio (barge / curl; above 1:
// barge is faster). Both send the same bytes to the same server; the
// server's own speed (Python) bounds both.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/controller/artifact_uploads.h"
#include "tests/support/s3_server.h"

namespace {

using barge::runner::StorageSpec;
using barge::runner::internal::ArtifactUploads;

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `curl -T FILE` signed with SigV4; its exit code.
int Curl(const barge::testing::S3Server& s, const std::string& file, const std::string& key) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string user = s.access_key() + ":" + s.secret_key();
    const std::string url = s.url() + "/barge-bench/" + key;
    execlp("curl", "curl", "-sSf", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", user.c_str(),
           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", file.c_str(), url.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t size_mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 128;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  const uint64_t part_mib = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 16;
  const int parallel = argc > 4 ? std::atoi(argv[4]) : 4;
  barge::testing::S3Server server({"barge-bench"});
  const std::string dir = "/tmp/barge-bench-s3-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/copy");
  const std::string file = dir + "/copy/model.bin";
  {
    std::ofstream out(file, std::ios::binary);
    std::string block(1 << 20, '\0');
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < size_mib; ++i) {
      for (char& c : block) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = static_cast<char>(x);
      }
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  }
  std::printf("file %zu MiB; barge: parts of %llu MiB, %d at once; server: moto %s on loopback\n", size_mib,
              static_cast<unsigned long long>(part_mib), parallel, server.url().c_str());
  std::printf("%-4s %12s %12s %10s %10s\n", "run", "curl -T s", "barge s", "curl MiB/s", "barge MiB/s");
  std::vector<double> curl_s, barge_s;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    if (Curl(server, file, "curl-" + std::to_string(r)) != 0) {
      std::fprintf(stderr, "curl -T failed\n");
      return 1;
    }
    const double c = Seconds(std::chrono::steady_clock::now() - t0);
    StorageSpec storage;
    storage.endpoint = server.url();
    storage.path_style = true;
    storage.access_key = server.access_key();
    storage.secret_key = server.secret_key();
    storage.part_size = part_mib << 20;
    storage.parallel = parallel;
    t0 = std::chrono::steady_clock::now();
    {
      ArtifactUploads up(storage, "");
      up.Queue("bench", file, "s3://barge-bench/barge-" + std::to_string(r), "job", 0, "h");
      if (!up.Drain(std::chrono::minutes(10))) {
        std::fprintf(stderr, "the upload did not finish\n");
        return 1;
      }
      for (const auto& s : up.TakeSent()) {
        if (!s.error.empty() || s.skipped) {
          std::fprintf(stderr, "upload: %s%s\n", s.error.c_str(), s.skipped ? " (skipped)" : "");
          return 1;
        }
      }
    }
    const double b = Seconds(std::chrono::steady_clock::now() - t0);
    curl_s.push_back(c);
    barge_s.push_back(b);
    std::printf("%-4d %12.2f %12.2f %10.1f %10.1f\n", r + 1, c, b, size_mib / c, size_mib / b);
  }
  std::printf("median: curl -T %.2f s, barge %.2f s; throughput ratio barge/curl = %.2f\n", Median(curl_s),
              Median(barge_s), Median(curl_s) / Median(barge_s));
  std::filesystem::remove_all(dir);
  return 0;
}
