// Mode mixing and weight reduction of the spectral convolution (torchlean/kernels/cuda/spectral.py).
//
// A spectrum value Z(b, k, c) is read at p[off] + i p[off + im], off = b * pb + k * pk + c * pc.
// The imaginary part sits `im` elements after the real part, so the kernels read cuFFT's
// interleaved complex output (im = 1) and the planar re/im rows of the DFT GEMM
// (im = modes * channels) alike.

struct SpecIn {
    i64 pb, pk, pc, im;
};

template <typename T>
__device__ __forceinline__ void spec_at(const T* __restrict__ p, const SpecIn& a, i64 b, i64 k, i64 c, T& vr, T& vi) {
    const T* q = p + b * a.pb + k * a.pk + c * a.pc;
    vr = q[0];
    vi = q[a.im];
}

#define MIX_TB 4   // batch rows per block (accumulators per thread)
#define MIX_TC 32  // contraction channels staged in shared memory at a time

// Y(b, k, d) = scale * sum_c Z(b, k, c) M(k, c, d) for k < modes: M = w (ADJ false: c = in, d = out)
// or M(k, c, d) = conj(w(k, d, c)) (ADJ true: c = out, d = in). Imaginary parts at DC and, for even
// n, Nyquist are written as 0: the inverse real transform ignores them (DESIGN.md), and cuFFT's
// C2R is not documented to. One block: one mode, MIX_TB batch rows, blockDim.x output channels.
template <typename T, bool ADJ>
__global__ void __launch_bounds__(128) spectral_mix(
    const T* __restrict__ x, i64 xb, i64 xk, i64 xc, i64 xim,
    const T* __restrict__ wre, const T* __restrict__ wim,
    T* __restrict__ y, i64 yb, i64 yk, i64 yd, i64 yim,
    i64 B, i64 modes, i64 C, i64 D, i64 n, i64 nbt, i64 ndt, T scale) {
    __shared__ T sre[MIX_TB][MIX_TC];
    __shared__ T sim[MIX_TB][MIX_TC];
    const SpecIn xa = {xb, xk, xc, xim};
    i64 t = blockIdx.x;
    const i64 dt = t % ndt;
    t /= ndt;
    const i64 bt = t % nbt;
    const i64 k = t / nbt;
    const i64 d = dt * blockDim.x + threadIdx.x;
    const i64 b0 = bt * MIX_TB;
    const T* wr = wre + k * C * D;
    const T* wi = wim + k * C * D;
    T ar[MIX_TB], ai[MIX_TB];
#pragma unroll
    for (int r = 0; r < MIX_TB; ++r) ar[r] = ai[r] = T(0);
    for (i64 c0 = 0; c0 < C; c0 += MIX_TC) {
        __syncthreads();
        for (int e = threadIdx.x; e < MIX_TB * MIX_TC; e += blockDim.x) {
            const int r = e / MIX_TC, cc = e % MIX_TC;
            T vr = T(0), vi = T(0);
            if (b0 + r < B && c0 + cc < C) spec_at(x, xa, b0 + r, k, c0 + cc, vr, vi);
            sre[r][cc] = vr;
            sim[r][cc] = vi;
        }
        __syncthreads();
        if (d < D) {
            const int nc = (int)(C - c0 < MIX_TC ? C - c0 : MIX_TC);
#pragma unroll 4
            for (int cc = 0; cc < nc; ++cc) {
                const i64 c = c0 + cc;
                const i64 j = ADJ ? d * C + c : c * D + d;
                const T mr = wr[j], mi = ADJ ? -wi[j] : wi[j];
#pragma unroll
                for (int r = 0; r < MIX_TB; ++r) {
                    ar[r] += sre[r][cc] * mr - sim[r][cc] * mi;
                    ai[r] += sre[r][cc] * mi + sim[r][cc] * mr;
                }
            }
        }
    }
    if (d >= D) return;
    const bool real_bin = k == 0 || 2 * k == n;
#pragma unroll
    for (int r = 0; r < MIX_TB; ++r) {
        if (b0 + r < B) {
            T* q = y + (b0 + r) * yb + k * yk + d * yd;
            q[0] = scale * ar[r];
            q[yim] = real_bin ? T(0) : scale * ai[r];
        }
    }
}

#define DW_TI 4  // input channels per thread

// dw(k, i, o) = (c_k / n) sum_b conj(X(b, k, i)) G(b, k, o), c_k = 1 at DC and (even n) Nyquist, else 2;
// re into dre, im into dim, both (modes, I, O). The batch is summed in order by one thread: no atomics.
template <typename T>
__global__ void __launch_bounds__(128) spectral_dw(
    const T* __restrict__ x, i64 xb, i64 xk, i64 xc, i64 xim,
    const T* __restrict__ g, i64 gb, i64 gk, i64 gc, i64 gim,
    T* __restrict__ dre, T* __restrict__ dim, i64 B, i64 modes, i64 I, i64 O, i64 n, i64 nit, i64 nott) {
    const SpecIn xa = {xb, xk, xc, xim}, ga = {gb, gk, gc, gim};
    i64 t = blockIdx.x;
    const i64 ot = t % nott;
    t /= nott;
    const i64 it = t % nit;
    const i64 k = t / nit;
    const i64 o = ot * blockDim.x + threadIdx.x;
    const i64 i0 = it * DW_TI;
    if (o >= O) return;
    T ar[DW_TI], ai[DW_TI];
#pragma unroll
    for (int r = 0; r < DW_TI; ++r) ar[r] = ai[r] = T(0);
#pragma unroll 4
    for (i64 b = 0; b < B; ++b) {
        T gr, gi;
        spec_at(g, ga, b, k, o, gr, gi);
#pragma unroll
        for (int r = 0; r < DW_TI; ++r) {
            if (i0 + r < I) {
                T xr, xi;
                spec_at(x, xa, b, k, i0 + r, xr, xi);
                ar[r] += xr * gr + xi * gi;
                ai[r] += xr * gi - xi * gr;
            }
        }
    }
    const T scale = T((k == 0 || 2 * k == n ? 1.0 : 2.0) / (double)n);
#pragma unroll
    for (int r = 0; r < DW_TI; ++r) {
        if (i0 + r < I) {
            const i64 j = (k * I + i0 + r) * O + o;
            dre[j] = scale * ar[r];
            dim[j] = scale * ai[r];
        }
    }
}

// The chunked DFT's last step. The GEMM split the grid axis into S chunks of L = n / S points,
// all multiplied by the one table of the first chunk, so P(b, s, k, c) lacks the factor
// tw(k, s) = exp(-2 pi i k s L / n): Z(b, k, c) = sum_s tw(k, s) P(b, s, k, c). P is (B S, 2 modes, C)
// and Z (B, 2 modes, C), re rows then im rows; tw is (2, modes, S), re then im. One thread a value.
template <typename T>
__global__ void spectral_finish(const T* __restrict__ p, const T* __restrict__ tw, T* __restrict__ z,
                                i64 B, int S, i64 modes, i64 C) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= B * modes * C) return;
    const i64 c = t % C, r = t / C;
    const i64 k = r % modes, b = r / modes;
    const i64 im = modes * C, ps = 2 * modes * C;
    const T* q = p + b * S * ps + k * C + c;
    const T* cr = tw + k * S;
    const T* ci = cr + modes * S;
    T vr = T(0), vi = T(0);
    for (int s = 0; s < S; ++s) {
        const T pr = q[s * ps], pi = q[s * ps + im];
        vr += pr * cr[s] - pi * ci[s];
        vi += pr * ci[s] + pi * cr[s];
    }
    z[(b * 2 * modes + k) * C + c] = vr;
    z[(b * 2 * modes + modes + k) * C + c] = vi;
}
