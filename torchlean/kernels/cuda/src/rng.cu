// Counter-based random numbers: the same splitmix64 integers as torchlean.spec.rng.random_bits,
// so uniforms agree bit for bit with the CPU. `key` = mix(seed * GOLD + counter) is computed on
// the host; element i draws mix(key ^ (i * GOLD + GOLD)).

#define GOLD 0x9E3779B97F4A7C15ULL

__device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 bits_at(u64 key, u64 i) { return mix64(key ^ (i * GOLD + GOLD)); }

// Top 24 bits / 2**24 (float32) and top 53 bits / 2**53 (float64): exact, in [0, 1).
__device__ __forceinline__ float u24(u64 b) { return float(b >> 40) * (1.0f / 16777216.0f); }
__device__ __forceinline__ double u53(u64 b) { return double(b >> 11) * (1.0 / 9007199254740992.0); }

// Each thread draws RILP elements strided by blockDim: coalesced stores, independent hashes.
#define RILP 4

__global__ void uniform_f32(float* __restrict__ out, i64 n, u64 key) {
    const i64 base = (i64)blockIdx.x * blockDim.x * RILP + threadIdx.x;
#pragma unroll
    for (int k = 0; k < RILP; ++k) {
        const i64 t = base + (i64)k * blockDim.x;
        if (t < n) out[t] = u24(bits_at(key, (u64)t));
    }
}

__global__ void uniform_f64(double* __restrict__ out, i64 n, u64 key) {
    const i64 base = (i64)blockIdx.x * blockDim.x * RILP + threadIdx.x;
#pragma unroll
    for (int k = 0; k < RILP; ++k) {
        const i64 t = base + (i64)k * blockDim.x;
        if (t < n) out[t] = u53(bits_at(key, (u64)t));
    }
}

// Box-Muller on the float64 uniforms of indices 2t and 2t + 1, rounded to T at the end,
// written operation for operation as the host computes it.
template <typename T>
__global__ void randn_kernel(T* __restrict__ out, i64 n, u64 key) {
    const double two_pi = 6.283185307179586;
    const i64 base = (i64)blockIdx.x * blockDim.x * RILP + threadIdx.x;
#pragma unroll
    for (int k = 0; k < RILP; ++k) {
        const i64 t = base + (i64)k * blockDim.x;
        if (t < n) {
            const double u1 = 1.0 - u53(bits_at(key, 2 * (u64)t));
            const double u2 = u53(bits_at(key, 2 * (u64)t + 1));
            const double r = sqrt(-2.0 * log(u1));
            const double c = cos(two_pi * u2);
            out[t] = T(r * c);
        }
    }
}

template <typename T>
__global__ void bernoulli_kernel(T* __restrict__ out, i64 n, u64 key, float p_keep) {
    const i64 base = (i64)blockIdx.x * blockDim.x * RILP + threadIdx.x;
#pragma unroll
    for (int k = 0; k < RILP; ++k) {
        const i64 t = base + (i64)k * blockDim.x;
        if (t < n) out[t] = u24(bits_at(key, (u64)t)) < p_keep ? T(1) : T(0);
    }
}
