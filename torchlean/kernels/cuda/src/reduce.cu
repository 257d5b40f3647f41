// Reductions of x viewed as (outer, n, inner) over the middle axis. Sums accumulate in double
// (float32 inputs too); max propagates NaN like NumPy. A long axis is split into `chunks`
// segments whose partial results a second launch reduces, so that few outputs still fill
// the GPU and the result does not depend on scheduling (no atomics).

enum { R_SUM = 0, R_MAX = 1 };

template <typename T, int OP> struct RAcc { typedef double type; };
template <typename T> struct RAcc<T, R_MAX> { typedef T type; };

template <typename A, int OP> __device__ __forceinline__ A r_init() {
    return OP == R_SUM ? A(0) : tl_neg_inf<A>();
}
template <int OP, typename A> __device__ __forceinline__ A r_op(A a, A b) {
    return OP == R_SUM ? a + b : tl_max(a, b);
}

template <int OP, typename A> __device__ __forceinline__ A sub_reduce(A v, int width) {
    for (int o = width >> 1; o > 0; o >>= 1) v = r_op<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// inner == 1: a group reduces one segment of a row. The group is the whole block (BLOCK) or
// `gw` adjacent lanes of a warp (gw a power of two <= 32, so short rows still give coalesced
// warp-wide loads). Group g covers row g / chunks, elements [c * seg, min(n, (c + 1) * seg)),
// c = g % chunks. Sums are multiplied by `scale` on the way out (1/count for a mean).
template <typename T, int OP, bool BLOCK>
__global__ void reduce_rows(const T* __restrict__ x, T* __restrict__ out, i64 groups, i64 n, i64 chunks,
                            i64 seg, int gw, double scale) {
    typedef typename RAcc<T, OP>::type A;
    __shared__ A sh[32];
    const int gsize = BLOCK ? blockDim.x : gw;
    const int lane = BLOCK ? threadIdx.x : (threadIdx.x & (gw - 1));
    const i64 g = BLOCK ? (i64)blockIdx.x : ((i64)blockIdx.x * blockDim.x + threadIdx.x) / gw;
    if (BLOCK && g >= groups) return;  // uniform over the block
    // Lanes past the last group stay to the end: the shuffles below need the whole warp.
    const bool valid = g < groups;
    const i64 row = valid ? g / chunks : 0, c = valid ? g - row * chunks : 0;
    const i64 lo = c * seg;
    const i64 hi = !valid ? lo : (lo + seg < n ? lo + seg : n);
    const T* p = x + row * n;
    A a0 = r_init<A, OP>(), a1 = a0, a2 = a0, a3 = a0;
    i64 j = lo + lane;
    for (; j + 3 * gsize < hi; j += 4 * gsize) {
        T v0 = p[j], v1 = p[j + gsize], v2 = p[j + 2 * gsize], v3 = p[j + 3 * gsize];
        a0 = r_op<OP>(a0, A(v0));
        a1 = r_op<OP>(a1, A(v1));
        a2 = r_op<OP>(a2, A(v2));
        a3 = r_op<OP>(a3, A(v3));
    }
    for (; j < hi; j += gsize) a0 = r_op<OP>(a0, A(p[j]));
    A a = r_op<OP>(r_op<OP>(a0, a1), r_op<OP>(a2, a3));
    if (BLOCK) a = OP == R_SUM ? group_sum<true>(a, sh) : group_max<true>(a, sh);
    else a = sub_reduce<OP>(a, gw);
    if (valid && lane == 0) out[g] = OP == R_SUM ? T(a * scale) : T(a);
}

// inner > 1: one thread per (o, c, i), coalesced along i; writes out[(o * chunks + c) * inner + i].
template <typename T, int OP>
__global__ void reduce_cols(const T* __restrict__ x, T* __restrict__ out, i64 outer, i64 n, i64 inner,
                            i64 chunks, i64 seg, double scale) {
    typedef typename RAcc<T, OP>::type A;
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= outer * chunks * inner) return;
    const i64 i = t % inner;
    const i64 r = t / inner;
    const i64 c = r % chunks, o = r / chunks;
    const i64 lo = c * seg;
    const i64 hi = lo + seg < n ? lo + seg : n;
    const T* p = x + o * n * inner + i;
    A a0 = r_init<A, OP>(), a1 = a0, a2 = a0, a3 = a0;
    i64 j = lo;
    for (; j + 3 < hi; j += 4) {
        T v0 = p[j * inner], v1 = p[(j + 1) * inner], v2 = p[(j + 2) * inner], v3 = p[(j + 3) * inner];
        a0 = r_op<OP>(a0, A(v0));
        a1 = r_op<OP>(a1, A(v1));
        a2 = r_op<OP>(a2, A(v2));
        a3 = r_op<OP>(a3, A(v3));
    }
    for (; j < hi; ++j) a0 = r_op<OP>(a0, A(p[j * inner]));
    const A a = r_op<OP>(r_op<OP>(a0, a1), r_op<OP>(a2, a3));
    out[t] = OP == R_SUM ? T(a * scale) : T(a);
}

// Backward of max over the middle axis: the cotangent goes to the first maximal entry, NumPy's
// argmax rule (the first NaN wins if there is one). `out` is zero-filled by the caller.
template <typename T>
__global__ void max_bwd_kernel(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ out, i64 outer,
                               i64 n, i64 inner) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= outer * inner) return;
    const i64 i = t % inner, o = t / inner;
    const T* p = x + o * n * inner + i;
    T best = p[0];
    i64 bi = 0;
    for (i64 j = 1; j < n && !tl_isnan(best); ++j) {
        T v = p[j * inner];
        if (v > best || tl_isnan(v)) {
            best = v;
            bi = j;
        }
    }
    out[(o * n + bi) * inner + i] = g[t];
}

// Whole-array float32 reduction with 16-byte loads: block c reduces [c * seg, min(n, (c + 1) * seg)),
// seg a multiple of 4 and x 16-byte aligned, four float4 loads in flight per thread.
template <int OP>
__global__ void reduce_vec4(const float* __restrict__ x, float* __restrict__ out, i64 n, i64 seg, double scale) {
    typedef typename RAcc<float, OP>::type A;
    __shared__ A sh[32];
    const i64 lo = (i64)blockIdx.x * seg;
    const i64 hi = lo + seg < n ? lo + seg : n;
    const i64 nv = (hi - lo) >> 2;
    const float4* __restrict__ p = reinterpret_cast<const float4*>(x + lo);
    const int gsize = blockDim.x;
    A a0 = r_init<A, OP>(), a1 = a0, a2 = a0, a3 = a0;
    i64 j = threadIdx.x;
    for (; j + 3 * gsize < nv; j += 4 * gsize) {
        float4 v0 = p[j], v1 = p[j + gsize], v2 = p[j + 2 * gsize], v3 = p[j + 3 * gsize];
        a0 = r_op<OP>(a0, r_op<OP>(r_op<OP>(A(v0.x), A(v0.y)), r_op<OP>(A(v0.z), A(v0.w))));
        a1 = r_op<OP>(a1, r_op<OP>(r_op<OP>(A(v1.x), A(v1.y)), r_op<OP>(A(v1.z), A(v1.w))));
        a2 = r_op<OP>(a2, r_op<OP>(r_op<OP>(A(v2.x), A(v2.y)), r_op<OP>(A(v2.z), A(v2.w))));
        a3 = r_op<OP>(a3, r_op<OP>(r_op<OP>(A(v3.x), A(v3.y)), r_op<OP>(A(v3.z), A(v3.w))));
    }
    for (; j < nv; j += gsize) {
        float4 v0 = p[j];
        a0 = r_op<OP>(a0, r_op<OP>(r_op<OP>(A(v0.x), A(v0.y)), r_op<OP>(A(v0.z), A(v0.w))));
    }
    for (i64 e = lo + (nv << 2) + threadIdx.x; e < hi; e += gsize) a0 = r_op<OP>(a0, A(x[e]));
    A a = r_op<OP>(r_op<OP>(a0, a1), r_op<OP>(a2, a3));
    a = OP == R_SUM ? group_sum<true>(a, sh) : group_max<true>(a, sh);
    if (threadIdx.x == 0) out[blockIdx.x] = OP == R_SUM ? float(a * scale) : float(a);
}

// ---- 16-byte vector loads (float4 / double2) for the layouts where plain loads leave bandwidth
// unused: short rows (one thread a row element gives too little work per thread) and column
// reductions (a warp then reads 512 bytes a row instead of 128).

template <typename T> struct Vec16;
template <> struct Vec16<float> {
    typedef float4 type;
    enum { N = 4 };
    template <typename A> __device__ __forceinline__ static A at(const float4& v, int k) {
        return A(k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w);
    }
};
template <> struct Vec16<double> {
    typedef double2 type;
    enum { N = 2 };
    template <typename A> __device__ __forceinline__ static A at(const double2& v, int k) {
        return A(k == 0 ? v.x : v.y);
    }
};

template <int OP, typename T, typename A> __device__ __forceinline__ A vec_fold(const typename Vec16<T>::type& v) {
    A a = Vec16<T>::template at<A>(v, 0);
#pragma unroll
    for (int k = 1; k < Vec16<T>::N; ++k) a = r_op<OP>(a, Vec16<T>::template at<A>(v, k));
    return a;
}

// inner == 1, rows of nv vectors (nv <= gw <= 32, gw a power of two), x 16-byte aligned. `gw`
// lanes share a row, one vector each, so a warp reads 32 / gw adjacent rows (contiguous bytes)
// per step; it takes four steps at once and strides over the grid (the row -> lanes assignment
// is fixed, so the result does not depend on scheduling).
template <typename T, int OP>
__global__ void reduce_rows_v(const T* __restrict__ x, T* __restrict__ out, i64 rows, i64 nv, int gw,
                              double scale) {
    typedef typename RAcc<T, OP>::type A;
    typedef typename Vec16<T>::type V;
    const V* __restrict__ p = reinterpret_cast<const V*>(x);
    const int lane = threadIdx.x & 31;
    const int q = lane / gw, l = lane & (gw - 1);
    const int rpw = 32 / gw;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 base = warp * 4 * rpw; base < rows; base += nwarps * 4 * rpw) {  // uniform over the warp
        A a[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const i64 row = base + k * rpw + q;
            a[k] = r_init<A, OP>();
            if (row < rows && l < nv) a[k] = vec_fold<OP, T, A>(p[row * nv + l]);
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const A s = sub_reduce<OP>(a[k], gw);
            const i64 row = base + k * rpw + q;
            if (l == 0 && row < rows) out[row] = OP == R_SUM ? T(s * scale) : T(s);
        }
    }
}

// inner > 1, inner a multiple of the vector width, x 16-byte aligned. Block (bx, by), by a power
// of two: lane tx owns VEC adjacent columns (vector cb * bx + tx of the row), ty takes rows
// lo + ty, lo + ty + by, ... of its chunk; the by partials are combined in shared memory in a
// fixed tree. Block b is (o, c, cb) with cb fastest; writes out[(o * chunks + c) * inner + col].
template <typename T, int OP>
__global__ void __launch_bounds__(256) reduce_cols_v(const T* __restrict__ x, T* __restrict__ out, i64 n,
                                                     i64 inner, i64 chunks, i64 seg, i64 ncb, double scale) {
    typedef typename RAcc<T, OP>::type A;
    typedef typename Vec16<T>::type V;
    enum { N = Vec16<T>::N };
    __shared__ A sh[256 * N];
    const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
    const i64 b = blockIdx.x;
    const i64 cb = b % ncb, r = b / ncb;
    const i64 c = r % chunks, o = r / chunks;
    const i64 nv = inner / N;
    const i64 v = cb * bx + tx;
    const i64 lo = c * seg;
    const i64 hi = lo + seg < n ? lo + seg : n;
    A a0[N], a1[N];
#pragma unroll
    for (int k = 0; k < N; ++k) a0[k] = a1[k] = r_init<A, OP>();
    if (v < nv) {
        const V* __restrict__ p = reinterpret_cast<const V*>(x + o * n * inner) + v;
        i64 j = lo + ty;
        for (; j + 3 * by < hi; j += 4 * by) {
            const V v0 = p[j * nv], v1 = p[(j + by) * nv], v2 = p[(j + 2 * by) * nv], v3 = p[(j + 3 * by) * nv];
#pragma unroll
            for (int k = 0; k < N; ++k) {
                a0[k] = r_op<OP>(a0[k], r_op<OP>(Vec16<T>::template at<A>(v0, k), Vec16<T>::template at<A>(v1, k)));
                a1[k] = r_op<OP>(a1[k], r_op<OP>(Vec16<T>::template at<A>(v2, k), Vec16<T>::template at<A>(v3, k)));
            }
        }
        for (; j < hi; j += by) {
            const V v0 = p[j * nv];
#pragma unroll
            for (int k = 0; k < N; ++k) a0[k] = r_op<OP>(a0[k], Vec16<T>::template at<A>(v0, k));
        }
    }
    const int me = (ty * bx + tx) * N;
#pragma unroll
    for (int k = 0; k < N; ++k) sh[me + k] = r_op<OP>(a0[k], a1[k]);
    __syncthreads();
    for (int s = by >> 1; s > 0; s >>= 1) {
        if (ty < s) {
            const int other = ((ty + s) * bx + tx) * N;
#pragma unroll
            for (int k = 0; k < N; ++k) sh[me + k] = r_op<OP>(sh[me + k], sh[other + k]);
        }
        __syncthreads();
    }
    if (ty == 0 && v < nv) {
        T* __restrict__ dst = out + (o * chunks + c) * inner + v * N;
#pragma unroll
        for (int k = 0; k < N; ++k) dst[k] = OP == R_SUM ? T(sh[me + k] * scale) : T(sh[me + k]);
    }
}
