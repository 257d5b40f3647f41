// Flash attention in float32: a tiled online-softmax forward and a two-kernel backward.
//
// Semantics are those of torchlean.kernels.host.attention.flash_attention_fwd/_bwd: logits s = (q * scale) k^T, a
// blocked logit becomes -1000 (or, with hard masking, its weight 0), the forward saves only
// the row log-sum-exp, and the backward recomputes the probabilities from it. No n x m matrix
// ever lives in device memory.
//
// Every kernel is one block of 256 threads (16 x 16) per tile of 64 rows, walking tiles of 64
// columns; a thread owns a 4 x 4 piece of each logit tile: rows ty*4 .. ty*4+3 and columns
// tx, tx+16, tx+32, tx+48. The 16 lanes that share ty are one half-warp, so row reductions
// are four xor-shuffles. Tile products read float4 from shared memory on both sides: four
// rows of a transposed tile, and four consecutive head components of a row-major tile whose
// row stride (DM + 4 floats) puts the 8 lanes of each quarter-warp on distinct bank groups;
// products whose columns are head components read four consecutive columns (tx*4 ..).
// Row-major tiles need no transposition, so the forward streams its key/value tiles with
// cp.async into a second buffer while it works on the current one.
//
// The caller pads d and e to multiples of 4 with zeros and passes 16-byte aligned arrays;
// DM (64 or 128) bounds both, and reductions over them stop at d or e.
//
// The backward is deterministic (no atomics): fa_bwd_dq walks the key tiles of one query tile
// (and writes delta = rowsum(dO * O) for the second kernel), fa_bwd_kv walks the query tiles of
// one key tile. Both recompute the logits, which costs two extra tile products over an
// atomic-accumulation scheme and buys run-to-run identical gradients.

#define FA_T 64    // rows per block and columns per tile
#define FA_NT 256
#define FA_LT 68   // row stride of transposed tiles: float4-aligned, 4 mod 32 (spread stores)

__device__ __forceinline__ float fa_inf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ float fa_row_max(float x) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ float fa_row_sum(float x) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

#define FA_FILL (-1000.f)  // the seeds' soft-mask logit

// Whether query row qi may attend key kj: a padding row (qi >= n, never written), or a key on or
// below the diagonal when causal and a nonzero mask entry (or no mask).
__device__ __forceinline__ bool fa_keep(const unsigned char* mask, long long base, long long sn, long long sm,
                                        int qi, int kj, int n, int causal) {
    return qi >= n || ((!causal || kj <= qi) && (mask == nullptr || mask[base + qi * sn + kj * sm] != 0));
}

__device__ __forceinline__ float4 fa_ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// 16 bytes global -> shared without registers; zeros when !valid (src is then not read).
__device__ __forceinline__ void fa_cp16(float* dst, const float* src, bool valid) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void fa_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void fa_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// 64 x DM slab from row row0 of a [*, width] matrix into dst[r * ld + c] (ld % 4 == 0),
// zero past rows_left and width, times mul: float4 loads and stores, coalesced.
template <int DM, int NT = FA_NT>
__device__ __forceinline__ void fa_load_n(float* dst, int ld, const float* __restrict__ src, long long row0,
                                          int rows_left, int width, float mul) {
    constexpr int C4 = DM / 4;
    for (int i = threadIdx.x; i < FA_T * C4; i += NT) {
        const int r = i / C4, c = (i % C4) * 4;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < rows_left && c < width) x = fa_ld4(&src[(row0 + r) * width + c]);
        x.x *= mul; x.y *= mul; x.z *= mul; x.w *= mul;
        *reinterpret_cast<float4*>(&dst[r * ld + c]) = x;
    }
}

// The same slab through cp.async (mul = 1); the caller commits and waits.
template <int DM, int NT = FA_NT>
__device__ __forceinline__ void fa_load_async(float* dst, int ld, const float* __restrict__ src, long long row0,
                                              int rows_left, int width) {
    constexpr int C4 = DM / 4;
    for (int i = threadIdx.x; i < FA_T * C4; i += NT) {
        const int r = i / C4, c = (i % C4) * 4;
        const bool ok = r < rows_left && c < width;
        fa_cp16(&dst[r * ld + c], ok ? &src[(row0 + r) * width + c] : src, ok);
    }
}

// The slab stored transposed, dst[c * FA_LT + r]: a warp covers 8 rows x 16 columns (short
// global segments, 2-way store conflicts). Used once per block.
template <int DM>
__device__ __forceinline__ void fa_load_t(float* dst, const float* __restrict__ src, long long row0,
                                          int rows_left, int width, float mul) {
    constexpr int C4 = DM / 4;
    for (int i = threadIdx.x; i < FA_T * C4; i += FA_NT) {
        const int rest = i >> 3;
        const int r = (rest / C4) * 8 + (i & 7), c = (rest % C4) * 4;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < rows_left && c < width) x = fa_ld4(&src[(row0 + r) * width + c]);
        dst[c * FA_LT + r] = x.x * mul;
        dst[(c + 1) * FA_LT + r] = x.y * mul;
        dst[(c + 2) * FA_LT + r] = x.z * mul;
        dst[(c + 3) * FA_LT + r] = x.w * mul;
    }
}

// acc[i][c] += sum_{k < kn} A[k][ty*4 + i] * B[tx + 16 c][k]: A transposed, B row-major
// (ldb % 4 == 0), kn a multiple of 4. 32 float4 loads per 256 multiply-adds.
__device__ __forceinline__ void fa_mm_rows(float (&acc)[4][4], const float* A, const float* B, int ldb, int kn,
                                           int tx, int ty) {
#pragma unroll 2
    for (int k = 0; k < kn; k += 4) {
        float4 a[4], b[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) a[j] = fa_ld4(&A[(k + j) * FA_LT + ty * 4]);
#pragma unroll
        for (int c = 0; c < 4; ++c) b[c] = fa_ld4(&B[(tx + 16 * c) * ldb + k]);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float bv[4] = {b[c].x, b[c].y, b[c].z, b[c].w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[0][c] = fmaf(reinterpret_cast<const float*>(&a[j])[0], bv[j], acc[0][c]);
                acc[1][c] = fmaf(reinterpret_cast<const float*>(&a[j])[1], bv[j], acc[1][c]);
                acc[2][c] = fmaf(reinterpret_cast<const float*>(&a[j])[2], bv[j], acc[2][c]);
                acc[3][c] = fmaf(reinterpret_cast<const float*>(&a[j])[3], bv[j], acc[3][c]);
            }
        }
    }
}

// acc[i][4h + c] += sum_{k < FA_T} A[k][ty*4 + i] * B[k][64h + tx*4 + c]: A transposed, B
// row-major (ldb % 4 == 0).
template <int NG>
__device__ __forceinline__ void fa_mm_cols(float (&acc)[4][4 * NG], const float* A, const float* B, int ldb,
                                           int tx, int ty) {
#pragma unroll 4
    for (int k = 0; k < FA_T; ++k) {
        const float4 a = fa_ld4(&A[k * FA_LT + ty * 4]);
        const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int h = 0; h < NG; ++h) {
            const float4 b = fa_ld4(&B[k * ldb + h * 64 + tx * 4]);
            const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[i][4 * h + c] = fmaf(av[i], bv[c], acc[i][4 * h + c]);
        }
    }
}

// dst[(tx + 16 c) * FA_LT + ty*4 + i] = x[i][c]: the thread's piece, stored column-major
// (conflict-free: the 8 lanes of a quarter-warp land 68 floats apart).
__device__ __forceinline__ void fa_store_t(float* dst, const float (&x)[4][4], int tx, int ty) {
#pragma unroll
    for (int c = 0; c < 4; ++c)
        *reinterpret_cast<float4*>(&dst[(tx + 16 * c) * FA_LT + ty * 4]) =
            make_float4(x[0][c], x[1][c], x[2][c], x[3][c]);
}

template <int DM>
__global__ void __launch_bounds__(FA_NT, DM == 64 ? 2 : 1) fa_fwd(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const unsigned char* __restrict__ mask, long long msb, long long msn, long long msm,
        float* __restrict__ out, float* __restrict__ lse, int n, int m, int d, int e, float scale, int hard,
        int tiles) {
    constexpr int NG = DM / 64, LN = DM + 4;
    extern __shared__ float4 fa_smem4[];
    float* Qt = reinterpret_cast<float*>(fa_smem4);  // [DM][FA_LT]
    float* Pt = Qt + DM * FA_LT;                      // [FA_T][FA_LT]
    float* Kn = Pt + FA_T * FA_LT;                    // 2 x [FA_T][LN]
    float* Vn = Kn + 2 * FA_T * LN;                   // 2 x [FA_T][LN]
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const long long b = blockIdx.x / tiles;
    // hard: bit 0 exact masking, bit 1 causal (the tiles wholly above the diagonal are skipped).
    const int causal = hard >> 1;
    hard &= 1;
    const int q0 = (blockIdx.x % tiles) * FA_T;
    const int kend = causal ? min(m, q0 + FA_T) : m;  // causal: no key beyond the tile's last query
    const float NEG_INF = -fa_inf();

    fa_load_async<DM>(Kn, LN, k, b * m, m, d);
    fa_load_async<DM>(Vn, LN, v, b * m, m, e);
    fa_cp_commit();
    fa_load_t<DM>(Qt, q, b * n + q0, n - q0, d, scale);

    float o[4][4 * NG], mrow[4], lrow[4], shift[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        mrow[i] = NEG_INF;
        lrow[i] = 0.f;
        shift[i] = 0.f;
#pragma unroll
        for (int c = 0; c < 4 * NG; ++c) o[i][c] = 0.f;
    }
    const long long mbase = b * msb;

    for (int k0 = 0, t = 0; k0 < kend; k0 += FA_T, ++t) {
        const float* Kc = Kn + (t & 1) * FA_T * LN;
        const float* Vc = Vn + (t & 1) * FA_T * LN;
        __syncthreads();  // every warp is done with the buffer the next prefetch fills, and with Pt
        if (k0 + FA_T < kend) {
            fa_load_async<DM>(Kn + ((t + 1) & 1) * FA_T * LN, LN, k, b * m + k0 + FA_T, m - k0 - FA_T, d);
            fa_load_async<DM>(Vn + ((t + 1) & 1) * FA_T * LN, LN, v, b * m + k0 + FA_T, m - k0 - FA_T, e);
            fa_cp_commit();
            fa_cp_wait<1>();
        } else {
            fa_cp_wait<0>();
        }
        __syncthreads();

        float s[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c) s[i][c] = 0.f;
        fa_mm_rows(s, Qt, Kc, LN, d, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int qi = q0 + ty * 4 + i;
            float tmax = NEG_INF;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int kj = k0 + tx + 16 * c;
                if (kj >= m) s[i][c] = NEG_INF;
                else if (!fa_keep(mask, mbase, msn, msm, qi, kj, n, causal))
                    s[i][c] = hard ? NEG_INF : FA_FILL;
                tmax = fmaxf(tmax, s[i][c]);
            }
            const float mnew = fmaxf(mrow[i], fa_row_max(tmax));
            // Rows with no allowed key yet (hard masking) keep max -inf: shift by 0 instead.
            const float sh = (hard && !isfinite(mnew)) ? 0.f : mnew;
            float psum = 0.f;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                s[i][c] = expf(s[i][c] - sh);
                psum += s[i][c];
            }
            const float alpha = expf(mrow[i] - sh);
            lrow[i] = lrow[i] * alpha + fa_row_sum(psum);
            mrow[i] = mnew;
            shift[i] = sh;
#pragma unroll
            for (int c = 0; c < 4 * NG; ++c) o[i][c] *= alpha;
        }
        fa_store_t(Pt, s, tx, ty);
        __syncthreads();
        fa_mm_cols<NG>(o, Pt, Vc, LN, tx, ty);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int qi = q0 + ty * 4 + i;
        if (qi >= n) continue;
        const bool ok = lrow[i] > 0.f;
        const long long row = b * n + qi;
#pragma unroll
        for (int h = 0; h < NG; ++h) {
            const int col = h * 64 + tx * 4;
            if (col < e) {
                const float inv = ok ? lrow[i] : 1.f;
                *reinterpret_cast<float4*>(&out[row * e + col]) =
                    make_float4(o[i][4 * h] / inv, o[i][4 * h + 1] / inv, o[i][4 * h + 2] / inv,
                                o[i][4 * h + 3] / inv);
            }
        }
        if (tx == 0) lse[row] = ok ? shift[i] + logf(lrow[i]) : fa_inf();
    }
}

// dq for one query tile; also writes delta = rowsum(dO * O) of its rows for fa_bwd_kv.
template <int DM>
__global__ void __launch_bounds__(FA_NT, DM == 64 ? 2 : 1) fa_bwd_dq(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const unsigned char* __restrict__ mask, long long msb, long long msn, long long msm,
        const float* __restrict__ out, const float* __restrict__ lse, const float* __restrict__ g,
        float* __restrict__ dq, float* __restrict__ delta, int n, int m, int d, int e, float scale, int hard,
        int tiles) {
    constexpr int NG = DM / 64, LN = DM + 4;
    extern __shared__ float4 fa_smem4[];
    float* Qt = reinterpret_cast<float*>(fa_smem4);  // [DM][FA_LT]
    float* Gt = Qt + DM * FA_LT;                      // [DM][FA_LT]
    float* St = Gt + DM * FA_LT;                      // [FA_T][FA_LT]: dS, key-major
    float* Kn = St + FA_T * FA_LT;                    // [FA_T][LN]
    float* Vn = Kn + FA_T * LN;                       // [FA_T][LN]
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const long long b = blockIdx.x / tiles;
    // hard: bit 0 exact masking, bit 1 causal (the tiles wholly above the diagonal are skipped).
    const int causal = hard >> 1;
    hard &= 1;
    const int q0 = (blockIdx.x % tiles) * FA_T;
    const int kend = causal ? min(m, q0 + FA_T) : m;  // causal: no key beyond the tile's last query

    fa_load_t<DM>(Qt, q, b * n + q0, n - q0, d, scale);
    fa_load_t<DM>(Gt, g, b * n + q0, n - q0, e, 1.f);

    float L[4], D[4], acc[4][4 * NG];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int qi = q0 + ty * 4 + i;
        float part = 0.f;
        if (qi < n) {
            const long long row = b * n + qi;
            for (int col = tx; col < e; col += 16) part += g[row * e + col] * out[row * e + col];
        }
        D[i] = fa_row_sum(part);
        L[i] = qi < n ? lse[b * n + qi] : fa_inf();
        if (qi < n && tx == 0) delta[b * n + qi] = D[i];
#pragma unroll
        for (int c = 0; c < 4 * NG; ++c) acc[i][c] = 0.f;
    }
    const long long mbase = b * msb;

    for (int k0 = 0; k0 < kend; k0 += FA_T) {
        __syncthreads();
        fa_load_n<DM>(Kn, LN, k, b * m + k0, m - k0, d, 1.f);
        fa_load_n<DM>(Vn, LN, v, b * m + k0, m - k0, e, 1.f);
        __syncthreads();

        float s[4][4], dp[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c) s[i][c] = dp[i][c] = 0.f;
        fa_mm_rows(s, Qt, Kn, LN, d, tx, ty);
        fa_mm_rows(dp, Gt, Vn, LN, e, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int qi = q0 + ty * 4 + i;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int kj = k0 + tx + 16 * c;
                float ds = 0.f;
                if (kj < m) {
                    const bool keep = fa_keep(mask, mbase, msn, msm, qi, kj, n, causal);
                    // A replaced logit is a constant (its gradient 0); a hard-masked weight is 0.
                    if (keep) ds = expf(s[i][c] - L[i]) * (dp[i][c] - D[i]);
                }
                s[i][c] = ds;
            }
        }
        fa_store_t(St, s, tx, ty);
        __syncthreads();
        fa_mm_cols<NG>(acc, St, Kn, LN, tx, ty);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int qi = q0 + ty * 4 + i;
        if (qi >= n) continue;
#pragma unroll
        for (int h = 0; h < NG; ++h) {
            const int col = h * 64 + tx * 4;
            if (col < d)
                *reinterpret_cast<float4*>(&dq[(b * n + qi) * d + col]) =
                    make_float4(acc[i][4 * h] * scale, acc[i][4 * h + 1] * scale, acc[i][4 * h + 2] * scale,
                                acc[i][4 * h + 3] * scale);
        }
    }
}

// dk and dv for one key tile, walking the query tiles. The logit tile is held transposed
// (rows are keys), so lse and delta are per column and no reduction is needed.
template <int DM>
__global__ void __launch_bounds__(FA_NT, DM == 64 ? 2 : 1) fa_bwd_kv(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const unsigned char* __restrict__ mask, long long msb, long long msn, long long msm,
        const float* __restrict__ lse, const float* __restrict__ delta, const float* __restrict__ g,
        float* __restrict__ dk, float* __restrict__ dv, int n, int m, int d, int e, float scale, int hard,
        int tiles) {
    constexpr int NG = DM / 64, LN = DM + 4;
    extern __shared__ float4 fa_smem4[];
    float* Kt = reinterpret_cast<float*>(fa_smem4);  // [DM][FA_LT]
    float* Vt = Kt + DM * FA_LT;                      // [DM][FA_LT]
    float* Ps = Vt + DM * FA_LT;                      // [FA_T][FA_LT]: P, query-major
    float* Ss = Ps + FA_T * FA_LT;                    // [FA_T][FA_LT]: dS, query-major
    float* Qn = Ss + FA_T * FA_LT;                    // [FA_T][LN]
    float* Gn = Qn + FA_T * LN;                       // [FA_T][LN]
    float* Ls = Gn + FA_T * LN;                       // [FA_T]
    float* Ds = Ls + FA_T;                            // [FA_T]
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const long long b = blockIdx.x / tiles;
    // hard: bit 0 exact masking, bit 1 causal (the tiles wholly above the diagonal are skipped).
    const int causal = hard >> 1;
    hard &= 1;
    const int k0 = (blockIdx.x % tiles) * FA_T;

    fa_load_t<DM>(Kt, k, b * m + k0, m - k0, d, 1.f);
    fa_load_t<DM>(Vt, v, b * m + k0, m - k0, e, 1.f);
    float ak[4][4 * NG], av[4][4 * NG];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4 * NG; ++c) ak[i][c] = av[i][c] = 0.f;
    const long long mbase = b * msb;

    for (int q0 = causal ? k0 : 0; q0 < n; q0 += FA_T) {
        __syncthreads();
        fa_load_n<DM>(Qn, LN, q, b * n + q0, n - q0, d, scale);
        fa_load_n<DM>(Gn, LN, g, b * n + q0, n - q0, e, 1.f);
        if (threadIdx.x < FA_T) {
            const int qi = q0 + threadIdx.x;
            // A padding query has weight 0 everywhere: lse +inf makes exp(s - lse) = 0.
            Ls[threadIdx.x] = qi < n ? lse[b * n + qi] : fa_inf();
            Ds[threadIdx.x] = qi < n ? delta[b * n + qi] : 0.f;
        }
        __syncthreads();

        float s[4][4], dp[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c) s[i][c] = dp[i][c] = 0.f;
        fa_mm_rows(s, Kt, Qn, LN, d, tx, ty);
        fa_mm_rows(dp, Vt, Gn, LN, e, tx, ty);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int qc = tx + 16 * c, qi = q0 + qc;
            const float Lq = Ls[qc], Dq = Ds[qc];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int kj = k0 + ty * 4 + i;
                float p = 0.f, ds = 0.f;
                if (kj < m) {
                    const bool keep = fa_keep(mask, mbase, msn, msm, qi, kj, n, causal);
                    if (keep) {
                        p = expf(s[i][c] - Lq);
                        ds = p * (dp[i][c] - Dq);
                    } else if (!hard) {
                        p = expf(FA_FILL - Lq);  // the soft fill's weight; its logit is a constant
                    }
                }
                s[i][c] = p;
                dp[i][c] = ds;
            }
        }
        fa_store_t(Ps, s, tx, ty);
        fa_store_t(Ss, dp, tx, ty);
        __syncthreads();
        fa_mm_cols<NG>(av, Ps, Gn, LN, tx, ty);
        fa_mm_cols<NG>(ak, Ss, Qn, LN, tx, ty);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int kj = k0 + ty * 4 + i;
        if (kj >= m) continue;
        const long long row = b * m + kj;
#pragma unroll
        for (int h = 0; h < NG; ++h) {
            const int col = h * 64 + tx * 4;
            if (col < d)
                *reinterpret_cast<float4*>(&dk[row * d + col]) =
                    make_float4(ak[i][4 * h], ak[i][4 * h + 1], ak[i][4 * h + 2], ak[i][4 * h + 3]);
            if (col < e)
                *reinterpret_cast<float4*>(&dv[row * e + col]) =
                    make_float4(av[i][4 * h], av[i][4 * h + 1], av[i][4 * h + 2], av[i][4 * h + 3]);
        }
    }
}

// ---- Tensor-core kernels (compute capability 8.0 and later) ----------------------------------
//
// The same three kernels with the tile products on tensor cores in 3xTF32: each float32
// operand x is split into x_hi = tf32(x) and x_lo = tf32(x - x_hi), and a*b is accumulated
// in float32 as a_lo*b_hi + a_hi*b_lo + a_hi*b_hi (the dropped a_lo*b_lo is below float32
// rounding). This is the arithmetic of CUTLASS's OpMultiplyAddFastF32, which PyTorch's fp32
// memory-efficient attention uses on these GPUs; the results agree with the FMA kernels
// above to float32 rounding.
//
// A block is 4 warps; each warp owns 16 rows of the block's 64-row tile, and every tile
// product of a warp is a 16 x 64 (or 16 x DM) accumulator in the m16n8k8 layout: lane
// (g = lane/4, t = lane%4) holds rows g and g + 8, columns 2t and 2t + 1 of each 8-column
// block. Softmax rows are reduced over the 4 lanes of a quad. A probability tile feeds the
// next product straight from registers: the accumulator of columns 8c .. 8c + 7 is an A
// fragment whose k order is 0,2,4,6,1,3,5,7, and the B fragment reads its rows in that
// order, so no shuffles or shared-memory round trip are needed.
//
// Tiles that are B operands (read by all four warps) are split once, when staged: shared
// memory holds (hi, lo) pairs, row stride DM + 4 pairs, column c of row r at c ^ (r & 4).
// That swizzle makes both fragment patterns conflict-free for 64-bit loads (rows g, columns
// k + t of a logit product; rows 2t, 2t + 1, columns g of a probability product). Tiles
// that are A operands (a warp reads only its own rows) stay float32, row stride DM + 4.
// The B tiles are staged through registers, not cp.async: a raw double buffer would cost
// the shared memory that lets two blocks share a multiprocessor, and the other block's
// work hides the loads.

#define FT_NT 128   // 4 warps of 16 rows

__device__ __forceinline__ unsigned ft_tf32(float x) {
    unsigned r;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#else
    r = __float_as_uint(x);
#endif
    return r;
}

struct FtA {
    unsigned h[4], l[4];
};

__device__ __forceinline__ void ft_split(float x, unsigned& h, unsigned& l) {
    h = ft_tf32(x);
    l = ft_tf32(x - __uint_as_float(h));
}

__device__ __forceinline__ FtA ft_a(float a0, float a1, float a2, float a3) {
    FtA a;
    ft_split(a0, a.h[0], a.l[0]);
    ft_split(a1, a.h[1], a.l[1]);
    ft_split(a2, a.h[2], a.l[2]);
    ft_split(a3, a.h[3], a.l[3]);
    return a;
}

__device__ __forceinline__ void ft_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

// c += a * b for one 16 x 8 x 8 step; b0 = B[t][g], b1 = B[t + 4][g] as (hi, lo) pairs.
__device__ __forceinline__ void ft_mma3(float (&c)[4], const FtA& a, float2 b0, float2 b1) {
    ft_mma(c, a.l, __float_as_uint(b0.x), __float_as_uint(b1.x));
    ft_mma(c, a.h, __float_as_uint(b0.y), __float_as_uint(b1.y));
    ft_mma(c, a.h, __float_as_uint(b0.x), __float_as_uint(b1.x));
}

// Rows row0 .. row0+63 of a [*, width] matrix into a split tile (zero past rows_left and
// width): all global loads of the thread first, then the splits and 32-byte stores.
template <int DM, int NT>
__device__ __forceinline__ void ft_stage(float2* dst, const float* __restrict__ src, long long row0, int rows_left,
                                         int width) {
    constexpr int C4 = DM / 4, LP = DM + 4, IT = FA_T * C4 / NT;
    float4 x[IT];
#pragma unroll
    for (int u = 0; u < IT; ++u) {
        const int i = threadIdx.x + u * NT, r = i / C4, c = (i % C4) * 4;
        x[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < rows_left && c < width) x[u] = fa_ld4(&src[(row0 + r) * width + c]);
    }
#pragma unroll
    for (int u = 0; u < IT; ++u) {
        const int i = threadIdx.x + u * NT, r = i / C4, c = (i % C4) * 4;
        unsigned h[4], l[4];
        ft_split(x[u].x, h[0], l[0]);
        ft_split(x[u].y, h[1], l[1]);
        ft_split(x[u].z, h[2], l[2]);
        ft_split(x[u].w, h[3], l[3]);
        float4* d = reinterpret_cast<float4*>(dst + r * LP + (c ^ (r & 4)));
        d[0] = make_float4(__uint_as_float(h[0]), __uint_as_float(l[0]), __uint_as_float(h[1]), __uint_as_float(l[1]));
        d[1] = make_float4(__uint_as_float(h[2]), __uint_as_float(l[2]), __uint_as_float(h[3]), __uint_as_float(l[3]));
    }
}

// acc[j] += A[r0 .. r0+15][0 .. kn) * B[8j .. 8j+7][0 .. kn)^T: A float32 row-major (stride
// lda), B a split tile, kn a multiple of 8.
template <int NJ, int LP>
__device__ __forceinline__ void ft_nt(float (&acc)[NJ][4], const float* A, int lda, int r0, const float2* B, int kn,
                                      int g, int t) {
    const float* a_lo = A + (r0 + g) * lda + t;
    const float* a_hi = a_lo + 8 * lda;
    const int sw = g & 4;
    const float2* b0 = B + g * LP + t + sw;
    const float2* b1 = B + g * LP + t + 4 - sw;
#pragma unroll 2
    for (int k = 0; k < kn; k += 8) {
        const FtA a = ft_a(a_lo[k], a_hi[k], a_lo[k + 4], a_hi[k + 4]);
#pragma unroll
        for (int j = 0; j < NJ; ++j) ft_mma3(acc[j], a, b0[8 * j * LP + k], b1[8 * j * LP + k]);
    }
}

// acc[j] += P * B[0 .. 63][8j .. 8j+7] for j < nn/8, where P (16 x 64) is the accumulator
// p[c] of columns 8c .. 8c+7 and B is a split tile.
template <int NJ, int LP>
__device__ __forceinline__ void ft_nn(float (&acc)[NJ][4], const float (&p)[8][4], const float2* B, int nn, int g,
                                      int t) {
    const float2* b = B + 2 * t * LP + (g ^ ((t & 2) << 1));
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const FtA a = ft_a(p[c][0], p[c][2], p[c][1], p[c][3]);
#pragma unroll
        for (int j = 0; j < NJ; ++j)
            if (8 * j < nn) ft_mma3(acc[j], a, b[8 * c * LP + 8 * j], b[(8 * c + 1) * LP + 8 * j]);
    }
}

__device__ __forceinline__ float ft_quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float ft_quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

template <int N>
__device__ __forceinline__ void ft_zero(float (&x)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; ++j) x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.f;
}

// Row g + 8h of a warp's accumulator, times mul, into dst[0 .. width) (float2 stores; width is a
// multiple of 4, so a pair never straddles it).
template <int NJ>
__device__ __forceinline__ void ft_store_row(float* dst, const float (&acc)[NJ][4], int h, int width, float mul,
                                             int t) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        const int col = 8 * j + 2 * t;
        if (col < width)
            *reinterpret_cast<float2*>(&dst[col]) = make_float2(acc[j][2 * h] * mul, acc[j][2 * h + 1] * mul);
    }
}

template <int DM>
__global__ void __launch_bounds__(FT_NT, DM == 64 ? 2 : 1) ft_fwd(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const unsigned char* __restrict__ mask, long long msb, long long msn, long long msm,
        float* __restrict__ out, float* __restrict__ lse, int n, int m, int d, int e, float scale, int hard,
        int tiles) {
    constexpr int LD = DM + 4, NJ = DM / 8;
    extern __shared__ float4 fa_smem4[];
    float* Qs = reinterpret_cast<float*>(fa_smem4);         // [FA_T][LD] float32, times scale
    float2* Kp = reinterpret_cast<float2*>(Qs + FA_T * LD);  // [FA_T][LD] split
    float2* Vp = Kp + FA_T * LD;                             // [FA_T][LD] split
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, r0 = (threadIdx.x >> 5) * 16;
    const long long b = blockIdx.x / tiles;
    // hard: bit 0 exact masking, bit 1 causal (the tiles wholly above the diagonal are skipped).
    const int causal = hard >> 1;
    hard &= 1;
    const int q0 = (blockIdx.x % tiles) * FA_T;
    const int kend = causal ? min(m, q0 + FA_T) : m;  // causal: no key beyond the tile's last query
    const int dk = (d + 7) & ~7, en = (e + 7) & ~7;
    const float NEG_INF = -fa_inf();

    fa_load_n<DM, FT_NT>(Qs, LD, q, b * n + q0, n - q0, d, scale);
    float o[NJ][4], mrow[2] = {NEG_INF, NEG_INF}, lrow[2] = {0.f, 0.f}, shift[2] = {0.f, 0.f};
    ft_zero(o);
    const long long mbase = b * msb;
    const int qi0 = q0 + r0 + g;

    for (int k0 = 0; k0 < kend; k0 += FA_T) {
        __syncthreads();  // every warp is done with the previous key/value tiles
        ft_stage<DM, FT_NT>(Kp, k, b * m + k0, m - k0, d);
        ft_stage<DM, FT_NT>(Vp, v, b * m + k0, m - k0, e);
        __syncthreads();

        float s[8][4];
        ft_zero(s);
        ft_nt<8, LD>(s, Qs, LD, r0, Kp, dk, g, t);
        // a full tile without a mask, below the diagonal, has nothing to replace
        if (mask != nullptr || k0 + FA_T > m || (causal && k0 + FA_T > q0 + 1)) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int qi = qi0 + 8 * (c >> 1), kj = k0 + 8 * j + 2 * t + (c & 1);
                    if (kj >= m) s[j][c] = NEG_INF;
                    else if (!fa_keep(mask, mbase, msn, msm, qi, kj, n, causal))
                        s[j][c] = hard ? NEG_INF : FA_FILL;
                }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float tmax = NEG_INF;
#pragma unroll
            for (int j = 0; j < 8; ++j) tmax = fmaxf(tmax, fmaxf(s[j][2 * h], s[j][2 * h + 1]));
            const float mnew = fmaxf(mrow[h], ft_quad_max(tmax));
            // Rows with no allowed key yet (hard masking) keep max -inf: shift by 0 instead.
            const float sh = (hard && !isfinite(mnew)) ? 0.f : mnew;
            float psum = 0.f;
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    float& x = s[j][2 * h + c];
                    x = __expf(x - sh);
                    psum += x;
                }
            const float alpha = __expf(mrow[h] - sh);
            lrow[h] = lrow[h] * alpha + ft_quad_sum(psum);
            mrow[h] = mnew;
            shift[h] = sh;
#pragma unroll
            for (int j = 0; j < NJ; ++j) {
                o[j][2 * h] *= alpha;
                o[j][2 * h + 1] *= alpha;
            }
        }
        ft_nn<NJ, LD>(o, s, Vp, en, g, t);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int qi = qi0 + 8 * h;
        if (qi >= n) continue;
        const bool ok = lrow[h] > 0.f;
        const long long row = b * n + qi;
        ft_store_row<NJ>(&out[row * e], o, h, e, ok ? 1.f / lrow[h] : 1.f, t);
        if (t == 0) lse[row] = ok ? shift[h] + logf(lrow[h]) : fa_inf();
    }
}

// delta[r] = rowsum(dO * O) of rows r < rows (width e, a multiple of 4): one warp per row. The
// tensor-core backward computes it first, so that its two kernels are independent.
__global__ void __launch_bounds__(256) fa_delta(const float* __restrict__ out, const float* __restrict__ g_,
                                                float* __restrict__ delta, long long rows, int e) {
    const long long r = blockIdx.x * 8LL + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;  // the whole warp: it shares r
    float part = 0.f;
    for (int c = lane * 4; c < e; c += 128) {
        const float4 a = fa_ld4(&out[r * e + c]), b = fa_ld4(&g_[r * e + c]);
        part += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    if (lane == 0) delta[r] = part;
}

// dq for one query tile, walking the key tiles; delta comes from fa_delta.
template <int DM>
__global__ void __launch_bounds__(FT_NT, DM == 64 ? 2 : 1) ft_bwd_dq(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const unsigned char* __restrict__ mask, long long msb, long long msn, long long msm,
        const float* __restrict__ lse, const float* __restrict__ delta, const float* __restrict__ g_,
        float* __restrict__ dq, int n, int m, int d, int e, float scale, int hard, int tiles) {
    constexpr int LD = DM + 4, NJ = DM / 8;
    extern __shared__ float4 fa_smem4[];
    float* Qs = reinterpret_cast<float*>(fa_smem4);         // [FA_T][LD] float32, times scale
    float* Gs = Qs + FA_T * LD;                              // [FA_T][LD] float32: dO
    float2* Kp = reinterpret_cast<float2*>(Gs + FA_T * LD);  // [FA_T][LD] split
    float2* Vp = Kp + FA_T * LD;                             // [FA_T][LD] split
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, r0 = (threadIdx.x >> 5) * 16;
    const long long b = blockIdx.x / tiles;
    // hard: bit 0 exact masking, bit 1 causal (the tiles wholly above the diagonal are skipped).
    const int causal = hard >> 1;
    hard &= 1;
    const int q0 = (blockIdx.x % tiles) * FA_T;
    const int kend = causal ? min(m, q0 + FA_T) : m;  // causal: no key beyond the tile's last query
    const int dk = (d + 7) & ~7, en = (e + 7) & ~7;

    fa_load_n<DM, FT_NT>(Qs, LD, q, b * n + q0, n - q0, d, scale);
    fa_load_n<DM, FT_NT>(Gs, LD, g_, b * n + q0, n - q0, e, 1.f);
    const int qi0 = q0 + r0 + g;
    float D[2], L[2];
    D[0] = qi0 < n ? delta[b * n + qi0] : 0.f;
    D[1] = qi0 + 8 < n ? delta[b * n + qi0 + 8] : 0.f;
    L[0] = qi0 < n ? lse[b * n + qi0] : fa_inf();
    L[1] = qi0 + 8 < n ? lse[b * n + qi0 + 8] : fa_inf();
    float acc[NJ][4];
    ft_zero(acc);
    const long long mbase = b * msb;

    for (int k0 = 0; k0 < kend; k0 += FA_T) {
        __syncthreads();
        ft_stage<DM, FT_NT>(Kp, k, b * m + k0, m - k0, d);
        ft_stage<DM, FT_NT>(Vp, v, b * m + k0, m - k0, e);
        __syncthreads();

        float s[8][4], dp[8][4];
        ft_zero(s);
        ft_zero(dp);
        ft_nt<8, LD>(s, Qs, LD, r0, Kp, dk, g, t);
        ft_nt<8, LD>(dp, Gs, LD, r0, Vp, en, g, t);
        if (mask == nullptr && k0 + FA_T <= m && !(causal && k0 + FA_T > q0 + 1)) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) s[j][c] = __expf(s[j][c] - L[c >> 1]) * (dp[j][c] - D[c >> 1]);
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int h = c >> 1, qi = qi0 + 8 * h, kj = k0 + 8 * j + 2 * t + (c & 1);
                    float ds = 0.f;
                    if (kj < m) {
                        const bool keep = fa_keep(mask, mbase, msn, msm, qi, kj, n, causal);
                        // A replaced logit is a constant (its gradient 0); a hard-masked weight is 0.
                        if (keep) ds = __expf(s[j][c] - L[h]) * (dp[j][c] - D[h]);
                    }
                    s[j][c] = ds;
                }
        }
        ft_nn<NJ, LD>(acc, s, Kp, dk, g, t);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int qi = qi0 + 8 * h;
        if (qi >= n) continue;
        ft_store_row<NJ>(&dq[(b * n + qi) * d], acc, h, d, scale, t);
    }
}

// dk and dv for one key tile, walking the query tiles. The warps' rows are keys, so lse and
// delta are per column, read from shared memory.
template <int DM>
__global__ void __launch_bounds__(FT_NT, DM == 64 ? 2 : 1) ft_bwd_kv(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const unsigned char* __restrict__ mask, long long msb, long long msn, long long msm,
        const float* __restrict__ lse, const float* __restrict__ delta, const float* __restrict__ g_,
        float* __restrict__ dk_, float* __restrict__ dv, int n, int m, int d, int e, float scale, int hard,
        int tiles) {
    constexpr int LD = DM + 4, NJ = DM / 8;
    extern __shared__ float4 fa_smem4[];
    float* Ks = reinterpret_cast<float*>(fa_smem4);         // [FA_T][LD] float32
    float* Vs = Ks + FA_T * LD;                              // [FA_T][LD] float32
    float2* Qp = reinterpret_cast<float2*>(Vs + FA_T * LD);  // [FA_T][LD] split, not scaled
    float2* Gp = Qp + FA_T * LD;                             // [FA_T][LD] split: dO
    float* Ls = reinterpret_cast<float*>(Gp + FA_T * LD);    // [FA_T]
    float* Ds = Ls + FA_T;                                   // [FA_T]
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, r0 = (threadIdx.x >> 5) * 16;
    const long long b = blockIdx.x / tiles;
    // hard: bit 0 exact masking, bit 1 causal (the tiles wholly above the diagonal are skipped).
    const int causal = hard >> 1;
    hard &= 1;
    const int k0 = (blockIdx.x % tiles) * FA_T;
    const int dk = (d + 7) & ~7, en = (e + 7) & ~7;

    fa_load_n<DM, FT_NT>(Ks, LD, k, b * m + k0, m - k0, d, 1.f);
    fa_load_n<DM, FT_NT>(Vs, LD, v, b * m + k0, m - k0, e, 1.f);
    float ak[NJ][4], av[NJ][4];
    ft_zero(ak);
    ft_zero(av);
    const long long mbase = b * msb;
    const int kj0 = k0 + r0 + g;

    for (int q0 = causal ? k0 : 0; q0 < n; q0 += FA_T) {
        __syncthreads();
        ft_stage<DM, FT_NT>(Qp, q, b * n + q0, n - q0, d);
        ft_stage<DM, FT_NT>(Gp, g_, b * n + q0, n - q0, e);
        if (threadIdx.x < FA_T) {
            const int qi = q0 + threadIdx.x;
            // A padding query has weight 0 everywhere: lse +inf makes exp(s - lse) = 0.
            Ls[threadIdx.x] = qi < n ? lse[b * n + qi] : fa_inf();
            Ds[threadIdx.x] = qi < n ? delta[b * n + qi] : 0.f;
        }
        __syncthreads();

        float s[8][4], dp[8][4];
        ft_zero(s);
        ft_zero(dp);
        ft_nt<8, LD>(s, Ks, LD, r0, Qp, dk, g, t);
        ft_nt<8, LD>(dp, Vs, LD, r0, Gp, en, g, t);
        if (mask == nullptr && kj0 + 8 < m && !(causal && kj0 + 8 > q0)) {  // both rows of the lane are keys
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int qc = 8 * j + 2 * t + (c & 1);
                    s[j][c] = __expf(s[j][c] * scale - Ls[qc]);
                    dp[j][c] = s[j][c] * (dp[j][c] - Ds[qc]);
                }
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int kj = kj0 + 8 * (c >> 1), qc = 8 * j + 2 * t + (c & 1), qi = q0 + qc;
                    const float Lq = Ls[qc];
                    float p = 0.f, ds = 0.f;
                    if (kj < m) {
                        const bool keep = fa_keep(mask, mbase, msn, msm, qi, kj, n, causal);
                        if (keep) {
                            p = __expf(s[j][c] * scale - Lq);
                            ds = p * (dp[j][c] - Ds[qc]);
                        } else if (!hard) {
                            p = __expf(FA_FILL - Lq);  // the soft fill's weight; its logit is a constant
                        }
                    }
                    s[j][c] = p;
                    dp[j][c] = ds;
                }
        }
        ft_nn<NJ, LD>(av, s, Gp, en, g, t);
        ft_nn<NJ, LD>(ak, dp, Qp, dk, g, t);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int kj = kj0 + 8 * h;
        if (kj >= m) continue;
        const long long row = b * m + kj;
        ft_store_row<NJ>(&dk_[row * d], ak, h, d, scale, t);
        ft_store_row<NJ>(&dv[row * e], av, h, e, 1.f, t);
    }
}
