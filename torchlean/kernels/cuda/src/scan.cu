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

// ---- recurrences (RNN, LSTM, GRU) ---------------------------------------------------------------
// One time step t of one layer, one thread per (sequence n, unit j); the step's product with
// w_hh is a cuBLAS call before (forward) or after (backward) the cell. Time-major buffers: acts
// (T, N, G*H), states (T, N, H) (the LSTM's (2, T, N, H): h then c). A held step (mask 0) keeps
// the state and, going back, hands the cotangents of h and c on unchanged.
//
// The products run on fixed scratch buffers (the state h or the step's gate cotangents, copied
// there by the cells, and the product's result), and the cells find every other buffer through a
// device table (u64 entries, filled by rec_fill_table): a time loop captured once as a CUDA graph
// then replays on new buffers after the table is refilled.

__device__ __forceinline__ bool rec_real(const unsigned char* __restrict__ mask, i64 t, i64 N, i64 n) {
    return mask == nullptr || mask[t * N + n] != 0;
}

template <typename T> __device__ __forceinline__ T* rec_ptr(const u64* tab, int i) {
    return reinterpret_cast<T*>(tab[i]);
}

// tab[0, n) = the addresses b0..b9 (one thread each).
__global__ void rec_fill_table(u64* __restrict__ tab, u64 b0, u64 b1, u64 b2, u64 b3, u64 b4, u64 b5, u64 b6, u64 b7,
                               u64 b8, u64 b9, int n) {
    const int i = threadIdx.x;
    const u64 b[10] = {b0, b1, b2, b3, b4, b5, b6, b7, b8, b9};
    if (i < n) tab[i] = b[i];
}

// tab: acts, states, h0, c0, mask, zbuf, hbuf. acts[t] holds gx[t] and zbuf (N, 4H) h[t-1] w_hh^T;
// acts[t] becomes the activated gates (i, f, g, o), then c and h (h also into hbuf).
template <typename T>
__global__ void lstm_cell_fwd(const u64* __restrict__ tab, i64 t, i64 Tn, i64 N, i64 H) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N * H) return;
    T* acts = rec_ptr<T>(tab, 0);
    T* states = rec_ptr<T>(tab, 1);
    const T* h0 = rec_ptr<T>(tab, 2);
    const T* c0 = rec_ptr<T>(tab, 3);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(tab[4]);
    const i64 n = c / H, j = c - n * H, NH = N * H;
    T* z = acts + (t * N + n) * 4 * H;
    const T* zr = rec_ptr<T>(tab, 5) + n * 4 * H;
    const T i = tl_sigmoid(z[j] + zr[j]), f = tl_sigmoid(z[H + j] + zr[H + j]);
    const T g = tl_tanh(z[2 * H + j] + zr[2 * H + j]), o = tl_sigmoid(z[3 * H + j] + zr[3 * H + j]);
    z[j] = i;
    z[H + j] = f;
    z[2 * H + j] = g;
    z[3 * H + j] = o;
    const T hp = t ? states[(t - 1) * NH + c] : h0[c];
    const T cp = t ? states[(Tn + t - 1) * NH + c] : c0[c];
    T cn = f * cp + i * g, hn = o * tl_tanh(cn);
    if (!rec_real(mask, t, N, n)) {
        cn = cp;
        hn = hp;
    }
    states[t * NH + c] = hn;
    states[(Tn + t) * NH + c] = cn;
    rec_ptr<T>(tab, 6)[c] = hn;
}

// tab: acts, states, c0, mask, g, dgx, dh, dc, dbuf. dh, dc (N, H) carry the cotangents from step
// t+1; dgx[t] and dbuf (N, 4H) get the gates' pre-activation cotangents; afterwards dc is dc[t-1]
// and dh its part not through w_hh (the product after the cell adds dbuf w_hh).
template <typename T>
__global__ void lstm_cell_bwd(const u64* __restrict__ tab, i64 t, i64 Tn, i64 N, i64 H) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N * H) return;
    const T* acts = rec_ptr<T>(tab, 0);
    const T* states = rec_ptr<T>(tab, 1);
    const T* c0 = rec_ptr<T>(tab, 2);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(tab[3]);
    const T* g = rec_ptr<T>(tab, 4);
    T* dgx = rec_ptr<T>(tab, 5);
    T* dh = rec_ptr<T>(tab, 6);
    T* dc = rec_ptr<T>(tab, 7);
    const i64 n = c / H, j = c - n * H, NH = N * H;
    const T dhv = g[t * NH + c] + dh[c];
    T dcv = g[(Tn + t) * NH + c] + dc[c];
    T* dz = dgx + (t * N + n) * 4 * H;
    T* db = rec_ptr<T>(tab, 8) + n * 4 * H;
    if (!rec_real(mask, t, N, n)) {
        dz[j] = dz[H + j] = dz[2 * H + j] = dz[3 * H + j] = T(0);
        db[j] = db[H + j] = db[2 * H + j] = db[3 * H + j] = T(0);
        dh[c] = dhv;
        dc[c] = dcv;
        return;
    }
    const T* z = acts + (t * N + n) * 4 * H;
    const T i = z[j], f = z[H + j], gg = z[2 * H + j], o = z[3 * H + j];
    const T tc = tl_tanh(states[(Tn + t) * NH + c]);
    const T cp = t ? states[(Tn + t - 1) * NH + c] : c0[c];
    dcv += dhv * o * (T(1) - tc * tc);
    db[j] = dz[j] = dcv * gg * i * (T(1) - i);
    db[H + j] = dz[H + j] = dcv * cp * f * (T(1) - f);
    db[2 * H + j] = dz[2 * H + j] = dcv * i * (T(1) - gg * gg);
    db[3 * H + j] = dz[3 * H + j] = dhv * tc * o * (T(1) - o);
    dc[c] = dcv * f;
    dh[c] = T(0);
}

// tab: gx, a, b_hh, acts, hs, h0, mask, hbuf. a (N, 3H) = h[t-1] w_hh^T (without b_hh); acts[t]
// keeps r, z, n and a_n + b_hn; the new h also goes to hbuf.
template <typename T>
__global__ void gru_cell_fwd(const u64* __restrict__ tab, i64 t, i64 N, i64 H) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N * H) return;
    const T* gx = rec_ptr<T>(tab, 0);
    const T* a = rec_ptr<T>(tab, 1);
    const T* b_hh = rec_ptr<T>(tab, 2);
    T* acts = rec_ptr<T>(tab, 3);
    T* hs = rec_ptr<T>(tab, 4);
    const T* h0 = rec_ptr<T>(tab, 5);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(tab[6]);
    const i64 n = c / H, j = c - n * H, NH = N * H;
    const T* x = gx + (t * N + n) * 3 * H;
    const T* ar = a + n * 3 * H;
    const T r = tl_sigmoid(x[j] + ar[j] + b_hh[j]);
    const T z = tl_sigmoid(x[H + j] + ar[H + j] + b_hh[H + j]);
    const T an = ar[2 * H + j] + b_hh[2 * H + j];
    const T nn = tl_tanh(x[2 * H + j] + r * an);
    const T hp = t ? hs[(t - 1) * NH + c] : h0[c];
    T* u = acts + (t * N + n) * 4 * H;
    u[j] = r;
    u[H + j] = z;
    u[2 * H + j] = nn;
    u[3 * H + j] = an;
    const T hn = rec_real(mask, t, N, n) ? nn + z * (hp - nn) : hp;
    hs[t * NH + c] = hn;
    rec_ptr<T>(tab, 7)[c] = hn;
}

// tab: acts, hs, h0, mask, g, dgx, da, dh, dabuf. dgx[t] = (dr, dz, dn) at the pre-activations,
// da[t] and dabuf = (dr, dz, dn r) at a = h w_hh^T + b_hh; dh becomes its part not through w_hh
// (dh z), the product after the cell adds dabuf w_hh.
template <typename T>
__global__ void gru_cell_bwd(const u64* __restrict__ tab, i64 t, i64 N, i64 H) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N * H) return;
    const T* acts = rec_ptr<T>(tab, 0);
    const T* hs = rec_ptr<T>(tab, 1);
    const T* h0 = rec_ptr<T>(tab, 2);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(tab[3]);
    const T* g = rec_ptr<T>(tab, 4);
    T* dgx = rec_ptr<T>(tab, 5);
    T* da = rec_ptr<T>(tab, 6);
    T* dh = rec_ptr<T>(tab, 7);
    const i64 n = c / H, j = c - n * H, NH = N * H;
    const T dhv = g[t * NH + c] + dh[c];
    T* dx = dgx + (t * N + n) * 3 * H;
    T* dA = da + (t * N + n) * 3 * H;
    T* dB = rec_ptr<T>(tab, 8) + n * 3 * H;
    if (!rec_real(mask, t, N, n)) {
        dx[j] = dx[H + j] = dx[2 * H + j] = T(0);
        dA[j] = dA[H + j] = dA[2 * H + j] = T(0);
        dB[j] = dB[H + j] = dB[2 * H + j] = T(0);
        dh[c] = dhv;
        return;
    }
    const T* u = acts + (t * N + n) * 4 * H;
    const T r = u[j], z = u[H + j], nn = u[2 * H + j], an = u[3 * H + j];
    const T hp = t ? hs[(t - 1) * NH + c] : h0[c];
    const T dn = dhv * (T(1) - z) * (T(1) - nn * nn);
    const T dr = dn * an * r * (T(1) - r);
    const T dz = dhv * (hp - nn) * z * (T(1) - z);
    dx[j] = dr;
    dx[H + j] = dz;
    dx[2 * H + j] = dn;
    dB[j] = dA[j] = dr;
    dB[H + j] = dA[H + j] = dz;
    dB[2 * H + j] = dA[2 * H + j] = dn * r;
    dh[c] = dhv * z;
}

// tab: hs, h0, mask, zbuf, hbuf. hs[t] holds gx[t] and zbuf h[t-1] w_hh^T; hs[t] and hbuf get
// tanh or relu of their sum (or the held state).
template <typename T>
__global__ void rnn_cell_fwd(const u64* __restrict__ tab, i64 t, i64 N, i64 H, i64 relu) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N * H) return;
    T* hs = rec_ptr<T>(tab, 0);
    const T* h0 = rec_ptr<T>(tab, 1);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(tab[2]);
    const i64 n = c / H, NH = N * H;
    const T v = hs[t * NH + c] + rec_ptr<T>(tab, 3)[c];
    const T h = relu ? (v > T(0) ? v : T(0)) : tl_tanh(v);
    const T hn = rec_real(mask, t, N, n) ? h : (t ? hs[(t - 1) * NH + c] : h0[c]);
    hs[t * NH + c] = hn;
    rec_ptr<T>(tab, 4)[c] = hn;
}

// tab: hs, mask, g, dgx, dh, dbuf: dgx[t] and dbuf get the pre-activation cotangent.
template <typename T>
__global__ void rnn_cell_bwd(const u64* __restrict__ tab, i64 t, i64 N, i64 H, i64 relu) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N * H) return;
    const T* hs = rec_ptr<T>(tab, 0);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(tab[1]);
    const T* g = rec_ptr<T>(tab, 2);
    T* dgx = rec_ptr<T>(tab, 3);
    T* dh = rec_ptr<T>(tab, 4);
    const i64 n = c / H, NH = N * H;
    const T dhv = g[t * NH + c] + dh[c];
    T* db = rec_ptr<T>(tab, 5);
    if (!rec_real(mask, t, N, n)) {
        db[c] = dgx[t * NH + c] = T(0);
        dh[c] = dhv;
        return;
    }
    const T h = hs[t * NH + c];
    db[c] = dgx[t * NH + c] = relu ? (h > T(0) ? dhv : T(0)) : dhv * (T(1) - h * h);
    dh[c] = T(0);
}

// ---- running sum along the middle axis of (outer, n, inner) -------------------------------------
// One thread per line, in order, summed in double and each prefix rounded once to T: NumPy's
// cumsum with a float64 accumulator, so the same bits as the host kernel.
template <typename T>
__global__ void cumsum_k(const T* __restrict__ x, T* __restrict__ y, i64 outer, i64 n, i64 inner) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= outer * inner) return;
    const i64 o = t / inner, i = t - o * inner;
    const T* __restrict__ xr = x + o * n * inner + i;
    T* __restrict__ yr = y + o * n * inner + i;
    double acc = 0.0;
    for (i64 j = 0; j < n; ++j) {
        acc += (double)xr[j * inner];
        yr[j * inner] = (T)acc;
    }
}
