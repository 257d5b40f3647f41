// Prepended to every .cu source of torchlean.kernels.cuda before NVRTC compiles it
// (prepending rather than #include keeps CuPy's on-disk kernel cache keyed by the full text).

typedef long long i64;
typedef unsigned long long u64;

// float / double overloads, so one template body serves both precisions without relying
// on which C++ overloads the NVRTC headers happen to declare.
__device__ __forceinline__ float tl_exp(float x) { return expf(x); }
__device__ __forceinline__ double tl_exp(double x) { return exp(x); }
__device__ __forceinline__ float tl_log(float x) { return logf(x); }
__device__ __forceinline__ double tl_log(double x) { return log(x); }
__device__ __forceinline__ float tl_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double tl_log1p(double x) { return log1p(x); }
__device__ __forceinline__ float tl_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double tl_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float tl_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double tl_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float tl_erf(float x) { return erff(x); }
__device__ __forceinline__ double tl_erf(double x) { return erf(x); }
__device__ __forceinline__ float tl_pow(float x, float p) { return powf(x, p); }
__device__ __forceinline__ double tl_pow(double x, double p) { return pow(x, p); }
__device__ __forceinline__ float tl_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double tl_abs(double x) { return fabs(x); }

template <typename T> __device__ __forceinline__ T tl_neg_inf();
template <> __device__ __forceinline__ float tl_neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double tl_neg_inf<double>() { return __longlong_as_double(0xfff0000000000000LL); }
template <typename T> __device__ __forceinline__ T tl_inf() { return -tl_neg_inf<T>(); }

template <typename T> __device__ __forceinline__ bool tl_isnan(T x) { return x != x; }

// Maximum that propagates NaN, as NumPy's max/maximum do (fmax would drop it).
template <typename T> __device__ __forceinline__ T tl_max(T a, T b) { return (a > b || tl_isnan(a)) ? a : b; }

// Numerically stable logistic: exp only of -|x|.
template <typename T> __device__ __forceinline__ T tl_sigmoid(T x) {
    T e = tl_exp(-tl_abs(x));
    T r = T(1) / (e + T(1));
    return x >= T(0) ? r : e * r;
}

// softplus(x) = max(x, 0) + log1p(exp(-|x|)).
template <typename T> __device__ __forceinline__ T tl_softplus(T x) {
    return (x > T(0) ? x : T(0)) + tl_log1p(tl_exp(-tl_abs(x)));
}

template <typename A> __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename A> __device__ __forceinline__ A warp_max(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = tl_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Reduce over a group that is one warp (BLOCK = false) or the whole block (BLOCK = true,
// blockDim a multiple of 32). Every thread of the group gets the result. `sh` holds 32 slots;
// the leading barrier lets consecutive calls reuse it.
template <bool BLOCK, typename A> __device__ __forceinline__ A group_sum(A v, A* sh) {
    v = warp_sum(v);
    if (!BLOCK) return v;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : A(0);
    return warp_sum(v);
}

template <bool BLOCK, typename A> __device__ __forceinline__ A group_max(A v, A* sh) {
    v = warp_max(v);
    if (!BLOCK) return v;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : tl_neg_inf<A>();
    return warp_max(v);
}

// One group per row: a warp (BLOCK = false; lanes of a 256-thread block take eight rows) or the
// whole block. Defines gsize, lane and row; a group past the last row leaves as a whole.
#define GROUP_SETUP                                                                            \
    const int gsize = BLOCK ? blockDim.x : 32;                                                 \
    const int lane = BLOCK ? threadIdx.x : (threadIdx.x & 31);                                 \
    const i64 row = BLOCK ? (i64)blockIdx.x : (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); \
    if (row >= rows) return;
