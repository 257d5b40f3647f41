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

// ---- batch normalization: x (N, C, S), statistics per channel over N * S values ----------------
//
// Three launches each way, all sums in double. Stage 1: a (P, C) grid; block (p, c) sums its slice
// of channel c (shifted by the channel's first value, so the one-pass variance does not cancel:
// the shifted-data algorithm) into part[c][p][0..1]. Stage 2: one thread per channel adds its P
// partials. Stage 3: one thread per element.

template <typename T> __device__ __forceinline__ i64 bn_index(i64 e, i64 c, i64 C, i64 S) {
    const i64 n = e / S;
    return (n * C + c) * S + (e - n * S);
}

template <typename T>
__global__ void bn_fwd_partial(const T* __restrict__ x, double* __restrict__ part, i64 N, i64 C, i64 S, i64 per) {
    __shared__ double sh[32];
    const i64 c = blockIdx.y, p = blockIdx.x, P = gridDim.x, total = N * S;
    const i64 lo = p * per, hi = lo + per < total ? lo + per : total;
    const double k = double(x[c * S]);  // the channel's first value (n = 0, s = 0)
    double s1 = 0.0, s2 = 0.0;
    for (i64 e = lo + threadIdx.x; e < hi; e += blockDim.x) {
        const double d = double(x[bn_index<T>(e, c, C, S)]) - k;
        s1 += d;
        s2 += d * d;
    }
    s1 = group_sum<true>(s1, sh);
    s2 = group_sum<true>(s2, sh);
    if (threadIdx.x == 0) {
        part[(c * P + p) * 2] = s1;
        part[(c * P + p) * 2 + 1] = s2;
    }
}

// Channel c's mean and biased variance from bn_fwd_partial's shifted sums (shift k, the channel's
// first value): mean = k + S1 / n; var = (S2 - S1^2 / n) / n, clamped at 0.
template <typename T>
__device__ void bn_moments(const T* __restrict__ x, const double* __restrict__ part, i64 c, i64 N, i64 S,
                           i64 P, double& mean, double& var) {
    double s1 = 0.0, s2 = 0.0;
    for (i64 p = 0; p < P; ++p) {
        s1 += part[(c * P + p) * 2];
        s2 += part[(c * P + p) * 2 + 1];
    }
    const double n = double(N * S);
    mean = double(x[c * S]) + s1 / n;
    var = (s2 - s1 * s1 / n) / n;
    if (var < 0.0) var = 0.0;
}

// rstd = 1 / sqrt(var + eps).
template <typename T>
__global__ void bn_fwd_stats(const T* __restrict__ x, const double* __restrict__ part, T* __restrict__ mean,
                             T* __restrict__ rstd, double* __restrict__ stat, i64 N, i64 C, i64 S, i64 P,
                             double eps) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double mu, var;
    bn_moments(x, part, c, N, S, P, mu, var);
    const double r = 1.0 / sqrt(var + eps);
    mean[c] = T(mu);
    rstd[c] = T(r);
    stat[c] = r;  // the scale uses rstd in double, as the host kernel does
}

// The running averages (PyTorch's rule, in double): running = (1 - m) running + m stat, with the
// batch mean and the unbiased batch variance. rmean and rvar may be one buffer (the other one
// absent, its flag 0): not __restrict__.
template <typename T>
__global__ void bn_running(const T* __restrict__ x, const double* __restrict__ part, T* rmean,
                           T* rvar, i64 N, i64 C, i64 S, i64 P, double m, int has_mean, int has_var) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double mu, var;
    bn_moments(x, part, c, N, S, P, mu, var);
    const double n = double(N * S);
    if (has_mean) rmean[c] = T((1.0 - m) * double(rmean[c]) + m * mu);
    if (has_var) rvar[c] = T((1.0 - m) * double(rvar[c]) + m * (var * n / (n - 1.0)));
}

// y = (x - mean) * (rstd * gamma) + beta: the mean is subtracted before scaling (no cancellation).
template <typename T>
__global__ void bn_fwd_apply(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                             const T* __restrict__ mean, const double* __restrict__ stat, T* __restrict__ y,
                             i64 total, i64 C, i64 S) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        const i64 c = (i / S) % C;
        const T scale = T(stat[c] * double(gamma[c]));
        y[i] = (x[i] - mean[c]) * scale + beta[c];
    }
}

// Partial sums of g and of g * xhat per (p, c), xhat = (x - mean) * rstd.
template <typename T>
__global__ void bn_bwd_partial(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ mean,
                               const T* __restrict__ rstd, double* __restrict__ part, i64 N, i64 C, i64 S, i64 per) {
    __shared__ double sh[32];
    const i64 c = blockIdx.y, p = blockIdx.x, P = gridDim.x, total = N * S;
    const i64 lo = p * per, hi = lo + per < total ? lo + per : total;
    const T mu = mean[c], r = rstd[c];
    double sg = 0.0, sgx = 0.0;
    for (i64 e = lo + threadIdx.x; e < hi; e += blockDim.x) {
        const i64 i = bn_index<T>(e, c, C, S);
        const double gv = double(g[i]);
        sg += gv;
        sgx += gv * double((x[i] - mu) * r);
    }
    sg = group_sum<true>(sg, sh);
    sgx = group_sum<true>(sgx, sh);
    if (threadIdx.x == 0) {
        part[(c * P + p) * 2] = sg;
        part[(c * P + p) * 2 + 1] = sgx;
    }
}

template <typename T>
__global__ void bn_bwd_stats(const double* __restrict__ part, T* __restrict__ dgamma, T* __restrict__ dbeta,
                             double* __restrict__ sums, i64 C, i64 P) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sg = 0.0, sgx = 0.0;
    for (i64 p = 0; p < P; ++p) {
        sg += part[(c * P + p) * 2];
        sgx += part[(c * P + p) * 2 + 1];
    }
    dbeta[c] = T(sg);
    dgamma[c] = T(sgx);
    sums[2 * c] = sg;
    sums[2 * c + 1] = sgx;
}

// dx = gamma * rstd * (g - mean(g) - xhat * mean(g * xhat)), channel by channel.
template <typename T>
__global__ void bn_bwd_apply(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ gamma,
                             const T* __restrict__ mean, const T* __restrict__ rstd,
                             const double* __restrict__ sums, T* __restrict__ dx, i64 total, i64 C, i64 S,
                             double cnt) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        const i64 c = (i64)((i / S) % C);
        const T r = rstd[c];
        const T k = T(double(gamma[c]) * double(r));
        const T m1 = T(sums[2 * c] / cnt), m2 = T(sums[2 * c + 1] / cnt);
        const T xhat = (x[i] - mean[c]) * r;
        dx[i] = k * (g[i] - m1 - xhat * m2);
    }
}
