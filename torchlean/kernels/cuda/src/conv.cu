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
