// Task 8.4: Fast matmul kernel
//
// Your kernel: C = A @ B for row-major float32 matrices, A is M x K, B is K x N, C is M x N.
// C is overwritten: it may hold anything before the call. The notebook builds this file with
//   g++ -O3 -march=native -fopenmp -shared -fPIC -std=c++17
// and calls mm_fast through ctypes; a C++ exception you throw becomes a Python RuntimeError.
#include <algorithm>
#include <stdexcept>

void mm_fast(const float* A, const float* B, float* C, int M, int K, int N) {
  // Loop order i-k-j: the innermost loop walks a row of B and a row of C, one float after the other,
  // and its iterations are independent, so the compiler turns it into vector instructions. Blocks of
  // B (BK x BJ floats, 512 KiB) are reused by BI rows of A while they are still in the cache.
  constexpr int BI = 64, BK = 256, BJ = 512;
  for (int j0 = 0; j0 < N; j0 += BJ) {
    const int j1 = std::min(N, j0 + BJ);
    for (int k0 = 0; k0 < K; k0 += BK) {
      const int k1 = std::min(K, k0 + BK);
      for (int i0 = 0; i0 < M; i0 += BI) {
        const int i1 = std::min(M, i0 + BI);
        for (int i = i0; i < i1; ++i) {
          float* c = C + static_cast<long>(i) * N;
          for (int k = k0; k < k1; ++k) {
            const float a = A[static_cast<long>(i) * K + k];
            const float* b = B + static_cast<long>(k) * N;
#pragma omp simd
            for (int j = j0; j < j1; ++j) c[j] += a * b[j];
          }
        }
      }
    }
  }
}
