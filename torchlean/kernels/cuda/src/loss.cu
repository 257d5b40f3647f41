// The class-target NLL loss with its backward: one or two launches instead of a chain of
// gathers, wheres and reductions.

// ---- nll_loss over rows of log-probabilities (M, C) -------------------------------------------
// Row i picks column t_i; an ignored row (t_i == ignore) weighs 0 and picks column 0, as the
// host kernel does. mode 0: per-row losses; 1: their sum; 2: sum / sum of weights.

template <typename T> __device__ __forceinline__ T nll_w(const i64* target, const T* weight, i64 i, i64 C,
                                                        i64 ignore, int has_w, i64* col) {
    const i64 t = target[i];
    const bool valid = t != ignore;
    *col = (valid && t >= 0 && t < C) ? t : 0;
    if (!valid) return T(0);
    return has_w ? weight[*col] : T(1);
}

template <typename T>
__global__ void nll_fwd_kernel(const T* __restrict__ lp, const i64* __restrict__ target, const T* __restrict__ weight,
                               T* __restrict__ out, i64 M, i64 C, i64 ignore, int mode, int has_w) {
    if (mode == 0) {
        const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= M) return;
        i64 c;
        const T w = nll_w(target, weight, i, C, ignore, has_w, &c);
        out[i] = -lp[i * C + c] * w;
        return;
    }
    __shared__ double sh[32];
    double s = 0.0, ws = 0.0;
    for (i64 i = threadIdx.x; i < M; i += blockDim.x) {
        i64 c;
        const T w = nll_w(target, weight, i, C, ignore, has_w, &c);
        s += double(-lp[i * C + c] * w);
        ws += double(w);
    }
    s = group_sum<true>(s, sh);
    ws = group_sum<true>(ws, sh);
    if (threadIdx.x == 0) out[0] = mode == 1 ? T(s) : T(s) / T(ws);
}

// scale[0] = g / sum of the rows' weights (the mean's backward factor); one block.
template <typename T>
__global__ void nll_scale_kernel(const i64* __restrict__ target, const T* __restrict__ weight, const T* __restrict__ g,
                                 T* __restrict__ scale, i64 M, i64 C, i64 ignore, int has_w) {
    __shared__ double sh[32];
    double ws = 0.0;
    for (i64 i = threadIdx.x; i < M; i += blockDim.x) {
        i64 c;
        ws += double(nll_w(target, weight, i, C, ignore, has_w, &c));
    }
    ws = group_sum<true>(ws, sh);
    if (threadIdx.x == 0) scale[0] = g[0] / T(ws);
}

// out[i, c] = -w_i * g_i at c = t_i, 0 elsewhere (every element written). g is per row
// (per_row = 1) or one value.
template <typename T>
__global__ void nll_bwd_kernel(const i64* __restrict__ target, const T* __restrict__ weight, const T* __restrict__ g,
                               T* __restrict__ out, i64 M, i64 C, i64 ignore, int has_w, int per_row) {
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= M * C) return;
    const i64 i = e / C, col = e - i * C;
    i64 c;
    const T w = nll_w(target, weight, i, C, ignore, has_w, &c);
    out[e] = col == c ? T(0) + (-w) * g[per_row ? i : 0] : T(0);
}
