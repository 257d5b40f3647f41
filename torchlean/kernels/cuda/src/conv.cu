// Convolution by im2col + cuBLAS: the column layout, its adjoint (col2im) and the bias pass.
//
// Layouts (row-major, a chunk of `nb` samples): x (nb, C, *in), cols (nb, C, K, P) with
// K = prod(k) kernel offsets in row-major order and P = prod(out) output positions, which is
// (nb, G, C/G * K, P) for the grouped GEMM. D, the number of spatial axes, is a template
// parameter so that the per-axis loops unroll.

#define CONV_MAXD 8

// Per-axis sizes, by value. Coordinates of one axis fit in int; flat offsets are i64.
struct ConvGeom {
    int in[CONV_MAXD];   // spatial sizes of the (unpadded) input
    int out[CONV_MAXD];  // output positions per axis
    int k[CONV_MAXD];
    int s[CONV_MAXD];
    int p[CONV_MAXD];
    int dil[CONV_MAXD];
};

// cols[r][j][o] = x[r][o * s - p + j * dil] (0 in the padding), r = sample * C + channel.
// Threads run over output positions o (coalesced writes, reads strided by s); each thread walks
// the K offsets with an odometer, so the inner loop has no divisions. blockIdx.y strides over r.
template <typename T, int D>
__global__ void im2col_k(ConvGeom g, const T* __restrict__ x, T* __restrict__ cols, i64 R, i64 K, i64 P,
                         i64 S) {
    const i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= P) return;
    int base[D];
    i64 rem = o;
#pragma unroll
    for (int a = D - 1; a >= 0; --a) {
        const int oa = (int)(rem % g.out[a]);
        rem /= g.out[a];
        base[a] = oa * g.s[a] - g.p[a];
    }
    for (i64 r = blockIdx.y; r < R; r += gridDim.y) {
        const T* __restrict__ xr = x + r * S;
        T* __restrict__ cr = cols + r * K * P + o;
        int j[D];
#pragma unroll
        for (int a = 0; a < D; ++a) j[a] = 0;
        for (i64 jj = 0; jj < K; ++jj) {
            bool ok = true;
            i64 off = 0;
#pragma unroll
            for (int a = 0; a < D; ++a) {
                const int pos = base[a] + j[a] * g.dil[a];
                ok = ok && (unsigned)pos < (unsigned)g.in[a];
                off = off * g.in[a] + pos;
            }
            cr[jj * P] = ok ? xr[off] : T(0);
#pragma unroll
            for (int a = D - 1; a >= 0; --a) {  // row-major odometer over the kernel offsets
                if (++j[a] < g.k[a]) break;
                j[a] = 0;
            }
        }
    }
}

// Adjoint of im2col as a gather: dx[r][i] = sum over offsets j (row-major order, as the host's
// col2im adds them) of dcols[r][j][o] for the o with o * s - p + j * dil = i, if any. Each
// input cell is written once by one thread: deterministic, no atomics.
template <typename T, int D>
__global__ void col2im_k(ConvGeom g, const T* __restrict__ dcols, T* __restrict__ dx, i64 R, i64 K, i64 P,
                         i64 S) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S) return;
    int q[D];
    i64 rem = i;
#pragma unroll
    for (int a = D - 1; a >= 0; --a) {
        q[a] = (int)(rem % g.in[a]) + g.p[a];
        rem /= g.in[a];
    }
    for (i64 r = blockIdx.y; r < R; r += gridDim.y) {
        const T* __restrict__ cr = dcols + r * K * P;
        int j[D];
#pragma unroll
        for (int a = 0; a < D; ++a) j[a] = 0;
        T acc = T(0);
        for (i64 jj = 0; jj < K; ++jj) {
            bool ok = true;
            i64 o = 0;
#pragma unroll
            for (int a = 0; a < D; ++a) {
                const int t = q[a] - j[a] * g.dil[a];
                const int sa = g.s[a];
                const int oa = sa == 1 ? t : t / sa;
                ok = ok && t >= 0 && oa * sa == t && oa < g.out[a];
                o = o * g.out[a] + oa;
            }
            if (ok) acc += cr[jj * P + o];
#pragma unroll
            for (int a = D - 1; a >= 0; --a) {
                if (++j[a] < g.k[a]) break;
                j[a] = 0;
            }
        }
        dx[r * S + i] = acc;
    }
}

// y[r][o] += b[r % C] over rows r = sample * C + channel.
template <typename T>
__global__ void bias_add_k(T* __restrict__ y, const T* __restrict__ b, i64 R, i64 C, i64 P) {
    const i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= P) return;
    for (i64 r = blockIdx.y; r < R; r += gridDim.y) y[r * P + o] += b[r % C];
}

// ---- pooling over the last D axes of (R, *in): R = batch x channels rows, blockIdx.y strides ----
// Each thread owns one output position (forward) or one input cell (backward) and walks the K
// window offsets in row-major order with an odometer: the order of the host's slab loop, so the
// winners and the sums in the backward are the host's.

// Max pooling: padding is -inf and never wins; a later offset wins only when strictly larger, or
// NaN over a number (the first winner, the first NaN). With padding, a window whose maximum is
// -inf routes to its first real cell. idx holds the row-major offset of the winner.
template <typename T, int D>
__global__ void max_pool_fwd_k(ConvGeom g, const T* __restrict__ x, T* __restrict__ y, i64* __restrict__ idx,
                               i64 R, i64 K, i64 P, i64 S, int padded) {
    const i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= P) return;
    int base[D];
    i64 rem = o;
#pragma unroll
    for (int a = D - 1; a >= 0; --a) {
        const int oa = (int)(rem % g.out[a]);
        rem /= g.out[a];
        base[a] = oa * g.s[a] - g.p[a];
    }
    const T neg_inf = tl_neg_inf<T>();
    for (i64 r = blockIdx.y; r < R; r += gridDim.y) {
        const T* __restrict__ xr = x + r * S;
        int j[D];
#pragma unroll
        for (int a = 0; a < D; ++a) j[a] = 0;
        T best = neg_inf;
        i64 win = 0, first = -1;
        for (i64 jj = 0; jj < K; ++jj) {
            bool ok = true;
            i64 off = 0;
#pragma unroll
            for (int a = 0; a < D; ++a) {
                const int pos = base[a] + j[a] * g.dil[a];
                ok = ok && (unsigned)pos < (unsigned)g.in[a];
                off = off * g.in[a] + pos;
            }
            const T v = ok ? xr[off] : neg_inf;
            if (ok && first < 0) first = jj;
            if (jj == 0) best = v;
            else if (v > best || (v != v && best == best)) { best = v; win = jj; }
#pragma unroll
            for (int a = D - 1; a >= 0; --a) {
                if (++j[a] < g.k[a]) break;
                j[a] = 0;
            }
        }
        if (padded && best == neg_inf && first >= 0) win = first;
        y[r * P + o] = best;
        idx[r * P + o] = win;
    }
}

// The window sums of average pooling (padding counts as zeros), times inv = 1 / prod(k).
template <typename T, int D>
__global__ void avg_pool_fwd_k(ConvGeom g, const T* __restrict__ x, T* __restrict__ y, i64 R, i64 K, i64 P,
                               i64 S, T inv) {
    const i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= P) return;
    int base[D];
    i64 rem = o;
#pragma unroll
    for (int a = D - 1; a >= 0; --a) {
        const int oa = (int)(rem % g.out[a]);
        rem /= g.out[a];
        base[a] = oa * g.s[a] - g.p[a];
    }
    for (i64 r = blockIdx.y; r < R; r += gridDim.y) {
        const T* __restrict__ xr = x + r * S;
        int j[D];
#pragma unroll
        for (int a = 0; a < D; ++a) j[a] = 0;
        T acc = T(0);
        for (i64 jj = 0; jj < K; ++jj) {
            bool ok = true;
            i64 off = 0;
#pragma unroll
            for (int a = 0; a < D; ++a) {
                const int pos = base[a] + j[a] * g.dil[a];
                ok = ok && (unsigned)pos < (unsigned)g.in[a];
                off = off * g.in[a] + pos;
            }
            if (ok) acc += xr[off];
#pragma unroll
            for (int a = D - 1; a >= 0; --a) {
                if (++j[a] < g.k[a]) break;
                j[a] = 0;
            }
        }
        y[r * P + o] = acc * inv;
    }
}

// A product that is never contracted into a fused multiply-add (the host rounds g * inv first).
__device__ __forceinline__ float tl_mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double tl_mul_rn(double a, double b) { return __dmul_rn(a, b); }

// Backward of both pools, gathered per input cell over the window offsets in row-major order:
// MAX adds g at the outputs whose winner is this cell's offset; AVG adds g * inv at every output
// whose window covers the cell.
template <typename T, int D, bool MAX>
__global__ void pool_bwd_k(ConvGeom g, const T* __restrict__ gy, const i64* __restrict__ idx, T* __restrict__ dx,
                           i64 R, i64 K, i64 P, i64 S, T inv) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S) return;
    int pos[D];
    i64 rem = i;
#pragma unroll
    for (int a = D - 1; a >= 0; --a) {
        pos[a] = (int)(rem % g.in[a]) + g.p[a];
        rem /= g.in[a];
    }
    for (i64 r = blockIdx.y; r < R; r += gridDim.y) {
        const T* __restrict__ gr = gy + r * P;
        int j[D];
#pragma unroll
        for (int a = 0; a < D; ++a) j[a] = 0;
        T acc = T(0);
        for (i64 jj = 0; jj < K; ++jj) {
            bool ok = true;
            i64 oo = 0;
#pragma unroll
            for (int a = 0; a < D; ++a) {
                const int t = pos[a] - j[a] * g.dil[a];
                const int q = t >= 0 ? t / g.s[a] : -1;
                ok = ok && t >= 0 && q * g.s[a] == t && q < g.out[a];
                oo = oo * g.out[a] + (ok ? q : 0);
            }
            if (ok) {
                if (MAX) {
                    if (idx[r * P + oo] == jj) acc += gr[oo];
                } else {
                    acc += tl_mul_rn(gr[oo], inv);
                }
            }
#pragma unroll
            for (int a = D - 1; a >= 0; --a) {
                if (++j[a] < g.k[a]) break;
                j[a] = 0;
            }
        }
        dx[r * S + i] = acc;
    }
}
