// Softmax family over the last axis, leading axes folded into rows; a group (GROUP_SETUP) reduces
// one row. Rows that fit in registers take softmax_reg / softmax_bwd_reg (at the end): one read
// of the row. Longer rows take the streaming kernels below, whose forward keeps a running
// (max, sum) pair per thread, rescaling the sum when the max grows, so the row is read once
// for the statistics and once for the output.

enum { SM_SOFTMAX = 0, SM_LOG_SOFTMAX = 1 };

template <typename T, int MODE, bool BLOCK>
__global__ void softmax_fwd(const T* __restrict__ x, T* __restrict__ y, i64 rows, i64 cols) {
    __shared__ T sh[32];
    GROUP_SETUP
    const T* p = x + row * cols;
    T* q = y + row * cols;
    const T ninf = tl_neg_inf<T>();
    T m = ninf, s = T(0);
    for (i64 j = lane; j < cols; j += gsize) {
        const T v = p[j];
        if (v > m) {
            s = s * tl_exp(m - v) + T(1);
            m = v;
        } else {
            s += v == ninf ? T(0) : tl_exp(v - m);  // a NaN makes s NaN, and so the row
        }
    }
    const T M = group_max<BLOCK>(m, sh);
    const T S = group_sum<BLOCK>(m == ninf ? T(0) : s * tl_exp(m - M), sh);
    if (MODE == SM_SOFTMAX) {
        for (i64 j = lane; j < cols; j += gsize) q[j] = tl_exp(p[j] - M) / S;
    } else {
        const T ls = tl_log(S);
        for (i64 j = lane; j < cols; j += gsize) q[j] = (p[j] - M) - ls;
    }
}

// Blocked entries (keep == 0) get weight exactly 0; a row with nothing kept is all zeros.
// The max over kept entries is replaced by 0 when it is not finite, as in the host kernel.
template <typename T, bool BLOCK>
__global__ void masked_softmax_fwd(const T* __restrict__ x, const unsigned char* __restrict__ keep,
                                   T* __restrict__ y, i64 rows, i64 cols) {
    __shared__ T sh[32];
    GROUP_SETUP
    const T* p = x + row * cols;
    const unsigned char* k = keep + row * cols;
    T* q = y + row * cols;
    T m = tl_neg_inf<T>();
    for (i64 j = lane; j < cols; j += gsize)
        if (k[j]) m = tl_max(m, p[j]);
    T M = group_max<BLOCK>(m, sh);
    if (!(M - M == T(0))) M = T(0);
    T s = T(0);
    for (i64 j = lane; j < cols; j += gsize)
        if (k[j]) s += tl_exp(p[j] - M);
    T S = group_sum<BLOCK>(s, sh);
    if (!(S > T(0))) S = T(1);
    for (i64 j = lane; j < cols; j += gsize) q[j] = k[j] ? tl_exp(p[j] - M) / S : T(0);
}

// MODE 0: softmax_bwd = y * (g - sum(g * y)); MODE 1: log_softmax_bwd = g - exp(y) * sum(g).
template <typename T, int MODE, bool BLOCK>
__global__ void softmax_bwd(const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ out, i64 rows,
                            i64 cols) {
    __shared__ double sh[32];
    GROUP_SETUP
    const T* py = y + row * cols;
    const T* pg = g + row * cols;
    T* q = out + row * cols;
    double a = 0.0;
    for (i64 j = lane; j < cols; j += gsize) a += MODE == SM_SOFTMAX ? double(pg[j] * py[j]) : double(pg[j]);
    const T S = T(group_sum<BLOCK>(a, sh));
    if (MODE == SM_SOFTMAX) {
        for (i64 j = lane; j < cols; j += gsize) q[j] = py[j] * (pg[j] - S);
    } else {
        for (i64 j = lane; j < cols; j += gsize) q[j] = pg[j] - tl_exp(py[j]) * S;
    }
}

// Register-resident rows: each thread of the group holds N elements (lane + k * gsize), so the
// row is read from memory exactly once. Groups are a warp (rows <= 32 N) or a 1024-thread block
// (rows <= 1024 N); longer rows take the kernels above. Padding slots hold -inf (forward) or 0.
template <typename T, int MODE, int N, bool BLOCK>
__global__ void __launch_bounds__(BLOCK ? 1024 : 256)
softmax_reg(const T* __restrict__ x, T* __restrict__ y, i64 rows, i64 cols) {
    __shared__ T sh[32];
    GROUP_SETUP
    const T* p = x + row * cols;
    T* q = y + row * cols;
    const T ninf = tl_neg_inf<T>();
    T v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        v[k] = j < cols ? p[j] : ninf;
    }
    T m = ninf;
#pragma unroll
    for (int k = 0; k < N; ++k) m = tl_max(m, v[k]);
    const T M = group_max<BLOCK>(m, sh);
    T s = T(0);
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        if (j < cols) {
            const T e = tl_exp(v[k] - M);
            s += e;
            if (MODE == SM_SOFTMAX) v[k] = e;
        }
    }
    const T S = group_sum<BLOCK>(s, sh);
    const T ls = MODE == SM_SOFTMAX ? T(0) : tl_log(S);
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        if (j < cols) q[j] = MODE == SM_SOFTMAX ? v[k] / S : (v[k] - M) - ls;
    }
}

template <typename T, int MODE, int N, bool BLOCK>
__global__ void __launch_bounds__(BLOCK ? 1024 : 256)
softmax_bwd_reg(const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ out, i64 rows, i64 cols) {
    __shared__ double sh[32];
    GROUP_SETUP
    const T* py = y + row * cols;
    const T* pg = g + row * cols;
    T* q = out + row * cols;
    T vy[N], vg[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        vy[k] = j < cols ? py[j] : T(0);
        vg[k] = j < cols ? pg[j] : T(0);
    }
    double a = 0.0;
#pragma unroll
    for (int k = 0; k < N; ++k) a += MODE == SM_SOFTMAX ? double(vg[k] * vy[k]) : double(vg[k]);
    const T S = T(group_sum<BLOCK>(a, sh));
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        if (j < cols) q[j] = MODE == SM_SOFTMAX ? vy[k] * (vg[k] - S) : vg[k] - tl_exp(vy[k]) * S;
    }
}
