// The selective scan: serial in time, parallel over batch rows and state channels.

// x, h: (B, L, S) contiguous; a, b: (S,) (VAR = false) or (B, L, S) (VAR = true); h0: (B, S).
// h[t] = a h[t-1] + (b x)[t], one thread per (batch row, channel); loads coalesce over channels.
template <typename T, bool VAR>
__global__ void scan_fwd(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ x,
                         const T* __restrict__ h0, T* __restrict__ h, i64 B, i64 L, i64 S) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= B * S) return;
    const i64 bi = c / S, s = c - bi * S;
    const T ac = VAR ? T(0) : a[s], bc = VAR ? T(0) : b[s];
    T prev = h0[c];
    i64 idx = bi * L * S + s;
    for (i64 t = 0; t < L; ++t, idx += S) {
        const T bx = (VAR ? b[idx] : bc) * x[idx];
        prev = (VAR ? a[idx] : ac) * prev + bx;
        h[idx] = prev;
    }
}

// Reverse sweep: gs[t] = g[t] + a[t+1] gs[t+1]; dx = gs b; dh0 = a[0] gs[0]. With VAR, da and db
// are elementwise (gs h[t-1], gs x); otherwise each thread writes its row's sums over time to
// da, db of shape (B, S), which the caller sums over B.
template <typename T, bool VAR>
__global__ void scan_bwd(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ x,
                         const T* __restrict__ h0, const T* __restrict__ h, const T* __restrict__ g,
                         T* __restrict__ dx, T* __restrict__ dh0, T* __restrict__ da, T* __restrict__ db, i64 B,
                         i64 L, i64 S) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= B * S) return;
    const i64 bi = c / S, s = c - bi * S;
    const T ac = VAR ? T(0) : a[s], bc = VAR ? T(0) : b[s];
    double sa = 0.0, sb = 0.0;
    T acc = T(0), a_next = T(0);
    i64 idx = (bi * L + L - 1) * S + s;
    for (i64 t = L - 1; t >= 0; --t, idx -= S) {
        acc = t == L - 1 ? g[idx] : g[idx] + a_next * acc;
        const T hp = t > 0 ? h[idx - S] : h0[c];
        dx[idx] = acc * (VAR ? b[idx] : bc);
        if (VAR) {
            da[idx] = acc * hp;
            db[idx] = acc * x[idx];
        } else {
            sa += double(acc * hp);
            sb += double(acc * x[idx]);
        }
        a_next = VAR ? a[idx] : ac;
    }
    dh0[c] = a_next * acc;
    if (!VAR) {
        da[c] = T(sa);
        db[c] = T(sb);
    }
}
