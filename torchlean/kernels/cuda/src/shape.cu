// Data movement of the seeds' kernels. Pure copies, so each is instantiated per element
// size (1, 2, 4, 8 bytes as unsigned integers) and serves every dtype of that size.

#define TILE 32
#define TROWS 8

// x (batch, R, C) -> y (batch, C, R), through a padded shared-memory tile so that both the
// reads and the writes are coalesced. One block per 32x32 tile, blocks enumerated in 1-D.
template <typename E>
__global__ void transpose_tiled(const E* __restrict__ x, E* __restrict__ y, i64 R, i64 C, i64 tiles_r,
                                i64 tiles_c) {
    __shared__ E tile[TILE][TILE + 1];
    i64 b = blockIdx.x;
    const i64 tc = b % tiles_c;
    b /= tiles_c;
    const i64 tr = b % tiles_r;
    const i64 batch = b / tiles_r;
    const E* xb = x + batch * R * C;
    E* yb = y + batch * R * C;
    const i64 c0 = tc * TILE, r0 = tr * TILE;
    for (int k = threadIdx.y; k < TILE; k += TROWS) {
        i64 r = r0 + k, c = c0 + threadIdx.x;
        if (r < R && c < C) tile[k][threadIdx.x] = xb[r * C + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < TILE; k += TROWS) {
        i64 c = c0 + k, r = r0 + threadIdx.x;
        if (r < R && c < C) yb[c * R + r] = tile[threadIdx.x][k];
    }
}

// x (A, B, C, D) -> y (A, C, B, D) for D > 1; one thread per output element, D fastest.
template <typename E>
__global__ void swap_middle(const E* __restrict__ x, E* __restrict__ y, i64 A, i64 B, i64 C, i64 D) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= A * B * C * D) return;
    i64 r = t;
    const i64 d = r % D;
    r /= D;
    const i64 b = r % B;
    r /= B;
    const i64 c = r % C;
    const i64 a = r / C;
    y[t] = x[((a * B + b) * C + c) * D + d];
}

// The seeds' broadcast_to: meta holds the output dims then, per output axis, the input stride
// (0 for inserted or stretched axes).
template <typename E>
__global__ void broadcast_nd(const E* __restrict__ x, E* __restrict__ y, i64 n, int ndim,
                             const i64* __restrict__ meta) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    i64 r = t, off = 0;
    for (int j = ndim - 1; j >= 0; --j) {
        const i64 d = meta[j];
        const i64 q = r / d;
        off += (r - q * d) * meta[ndim + j];
        r = q;
    }
    y[t] = x[off];
}

template <typename E>
__global__ void vec_to_rows(const E* __restrict__ v, E* __restrict__ y, i64 n, i64 cols) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) y[t] = v[t % cols];
}

template <typename E>
__global__ void vec_to_cols(const E* __restrict__ v, E* __restrict__ y, i64 n, i64 cols) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) y[t] = v[t / cols];
}

template <typename E>
__global__ void concat2(const E* __restrict__ a, i64 na, const E* __restrict__ b, i64 nb, E* __restrict__ y) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < na) y[t] = a[t];
    else if (t < na + nb) y[t] = b[t - na];
}

template <typename E>
__global__ void copy_range(const E* __restrict__ x, i64 start, E* __restrict__ y, i64 n) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) y[t] = x[start + t];
}
