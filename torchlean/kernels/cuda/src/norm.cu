// Layer normalization: one group per row, statistics in double as on the host.

// One output of a row: (v - mean) * rstd, then * gamma[j] and + beta[j] as flags say (1 gamma,
// 2 beta); lane 0 also records the row's statistics.
template <typename T> __device__ __forceinline__ T ln_out(T v, T mu, T r, const T* gamma, const T* beta, i64 j,
                                                         int flags) {
    T o = (v - mu) * r;
    if (flags & 1) o = o * gamma[j];
    if (flags & 2) o = o + beta[j];
    return o;
}

template <typename T> __device__ __forceinline__ void ln_stats(T* mean, T* rstd, i64 row, T mu, T r, int lane) {
    if (lane == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }
}

// y = (x - mean) * rstd (* gamma) (+ beta) over rows of length n; mean and biased variance in
// double, two passes (the row is re-read from cache). flags: 1 gamma, 2 beta.
template <typename T, bool BLOCK>
__global__ void layer_norm_fwd_k(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                                 T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, i64 rows, i64 n,
                                 double eps, int flags) {
    __shared__ double sh[32];
    GROUP_SETUP
    const T* p = x + row * n;
    T* q = y + row * n;
    double s = 0.0;
    for (i64 j = lane; j < n; j += gsize) s += double(p[j]);
    const double mu = group_sum<BLOCK>(s, sh) / double(n);
    double v = 0.0;
    for (i64 j = lane; j < n; j += gsize) {
        const double d = double(p[j]) - mu;
        v += d * d;
    }
    const double var = group_sum<BLOCK>(v, sh) / double(n);
    const double r = 1.0 / sqrt(var + eps);
    const T muT = T(mu), rT = T(r);
    for (i64 j = lane; j < n; j += gsize) q[j] = ln_out(p[j], muT, rT, gamma, beta, j, flags);
    ln_stats(mean, rstd, row, muT, rT, lane);
}

// Rows that fit in registers: a block holds the row (N elements per thread), so x is read once.
template <typename T, int N>
__global__ void __launch_bounds__(1024)
layer_norm_fwd_reg(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                   T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, i64 rows, i64 n, double eps,
                   int flags) {
    const bool BLOCK = true;
    __shared__ double sh[32];
    GROUP_SETUP
    const T* p = x + row * n;
    T* q = y + row * n;
    T v[N];
    double s = 0.0;
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        v[k] = j < n ? p[j] : T(0);
        s += double(v[k]);
    }
    const double mu = group_sum<true>(s, sh) / double(n);
    double var = 0.0;
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        const double d = double(v[k]) - mu;
        if (j < n) var += d * d;
    }
    var = group_sum<true>(var, sh) / double(n);
    const double r = 1.0 / sqrt(var + eps);
    const T muT = T(mu), rT = T(r);
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const i64 j = lane + (i64)k * gsize;
        if (j < n) q[j] = ln_out(v[k], muT, rT, gamma, beta, j, flags);
    }
    ln_stats(mean, rstd, row, muT, rT, lane);
}

// dx = rstd (gx - mean(gx) - xhat mean(gx xhat)), gx = g gamma; the two means in double.
// With gamma, row r of gxhat (rows x 2n) gets g * xhat and then g: the caller's one column sum
// gives dgamma and dbeta together.
template <typename T, bool BLOCK>
__global__ void layer_norm_bwd_k(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ mean,
                                 const T* __restrict__ rstd, const T* __restrict__ g, T* __restrict__ dx,
                                 T* __restrict__ gxhat, i64 rows, i64 n, int has_gamma) {
    __shared__ double sh[32];
    GROUP_SETUP
    const T* p = x + row * n;
    const T* pg = g + row * n;
    const T mu = mean[row], r = rstd[row];
    double s1 = 0.0, s2 = 0.0;
    for (i64 j = lane; j < n; j += gsize) {
        const T xh = (p[j] - mu) * r;
        const T gx = has_gamma ? pg[j] * gamma[j] : pg[j];
        s1 += double(gx);
        s2 += double(gx) * double(xh);
    }
    const T m1 = T(group_sum<BLOCK>(s1, sh) / double(n));
    const T m2 = T(group_sum<BLOCK>(s2, sh) / double(n));
    T* q = dx + row * n;
    for (i64 j = lane; j < n; j += gsize) {
        const T xh = (p[j] - mu) * r;
        const T gx = has_gamma ? pg[j] * gamma[j] : pg[j];
        q[j] = r * (gx - m1 - xh * m2);
        if (has_gamma) {
            gxhat[row * 2 * n + j] = pg[j] * xh;
            gxhat[row * 2 * n + n + j] = pg[j];
        }
    }
}
