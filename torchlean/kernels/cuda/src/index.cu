// Gather and scatter-add with host-validated indices (int64, each in [0, 2**32)). Gathers only
// move data and are instantiated per element size (T(0) is the zero bit pattern of every dtype).
// In range of uint32 but out of bounds: gather yields 0, scatter ignores the entry.
// Repeated scatter indices accumulate in index order (the host's order), one thread per target
// element walking its segment of the stably sorted indices: no atomics, run-to-run identical.

template <typename T>
__global__ void gather_vec_kernel(const T* __restrict__ v, i64 n, const i64* __restrict__ idx, i64 k,
                                  T* __restrict__ out) {
    const i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    const i64 i = idx[j];
    out[j] = i < n ? v[i] : T(0);
}

template <typename T>
__global__ void gather_rows_kernel(const T* __restrict__ mat, i64 rows, i64 cols, const i64* __restrict__ idx,
                                   i64 k, T* __restrict__ out) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= k * cols) return;
    const i64 j = t / cols, c = t - j * cols;
    const i64 i = idx[j];
    out[t] = i < rows ? mat[i * cols + c] : T(0);
}

// out[row * cols + c] += values[j * cols + c] for the j of each segment, in order: segment s
// holds the positions order[start[s] .. start[s + 1]) of the indices equal to seg_row[s].
// scatter_add is the case cols == 1.
template <typename T>
__global__ void scatter_add_rows_kernel(T* __restrict__ out, i64 rows, i64 cols, const T* __restrict__ values,
                                        const i64* __restrict__ order, const i64* __restrict__ seg_row,
                                        const i64* __restrict__ start, i64 nseg) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nseg * cols) return;
    const i64 s = t / cols, c = t - s * cols;
    const i64 i = seg_row[s];
    if (i >= rows) return;
    T acc = out[i * cols + c];
    for (i64 j = start[s]; j < start[s + 1]; ++j) acc += values[order[j] * cols + c];
    out[i * cols + c] = acc;
}

// The same sums with no sort plan, for CUDA-graph capture (a plan depends on the indices' values,
// which a captured graph reads from a device buffer). Thread (b, c) owns column c of the target
// rows [b * span, (b + 1) * span) and walks every index in order, adding the value rows whose index
// falls in its range: each target element's additions run in index order from its initial value,
// as in the sorted kernel, so the result is bit-identical. Work: k index reads per thread (one
// broadcast per warp) over ceil(rows / span) * cols threads; the host picks span so that about
// 2^17 threads run (span 1 for small tables, span = rows for a table wider than that).
template <typename T>
__global__ void scatter_add_rows_walk(T* __restrict__ out, i64 rows, i64 cols, const T* __restrict__ values,
                                      const i64* __restrict__ idx, i64 k, i64 span) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 nb = (rows + span - 1) / span;
    if (t >= nb * cols) return;
    const i64 b = t / cols, c = t - b * cols;
    const i64 lo = b * span, hi = lo + span < rows ? lo + span : rows;
    for (i64 j = 0; j < k; ++j) {
        const i64 i = idx[j];
        if (i >= lo && i < hi) out[i * cols + c] += values[j * cols + c];
    }
}

template <typename T>
__global__ void add_row_kernel(T* __restrict__ out, i64 cols, const T* __restrict__ row, i64 i) {
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) out[i * cols + c] += row[c];
}
