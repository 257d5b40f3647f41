// Optimizer steps: one launch updates the parameter and its state in place, in the order of
// operations of the host kernels (PyTorch's update rules). Scalars that the host computes in
// Python (bias corrections, decayed learning rates) arrive precomputed and rounded to T.

// flags: 1 weight decay, 2 momentum, 4 nesterov, 8 first step (buf := d)
template <typename T>
__global__ void sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, i64 n, T lr,
                           T momentum, T one_minus_dampening, T wd, int flags) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    T pv = p[t];
    T d = g[t];
    if (flags & 1) d = d + wd * pv;
    if (flags & 2) {
        T b;
        if (flags & 8) {
            b = d;
        } else {
            b = buf[t] * momentum;
            b += one_minus_dampening * d;
        }
        buf[t] = b;
        d = (flags & 4) ? d + momentum * b : b;
    }
    p[t] = pv - lr * d;
}

// One element of PyTorch's Adam/AdamW update, shared by the per-tensor and multi-tensor kernels
// so both give the same bits. flags: 1 L2 weight decay (g += wd p), 2 decoupled decay (p *= decay),
// 4 amsgrad (vmax), 8 maximize (g = -g).
template <typename T>
__device__ __forceinline__ void adam_update(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                                            T* __restrict__ v, T* __restrict__ vmax, i64 t, T beta1,
                                            T one_minus_beta1, T beta2, T one_minus_beta2, T wd, T decay,
                                            T sqrt_bc2, T eps, T step_size, int flags) {
    T pv = p[t];
    T gv = g[t];
    if (flags & 8) gv = -gv;
    if (flags & 2) pv = pv * decay;
    if (flags & 1) gv = gv + wd * pv;
    T mv = m[t] * beta1;
    mv += one_minus_beta1 * gv;
    T vv = v[t] * beta2;
    vv += one_minus_beta2 * gv * gv;
    m[t] = mv;
    v[t] = vv;
    T vu = vv;
    if (flags & 4) {
        vu = tl_max(vmax[t], vv);
        vmax[t] = vu;
    }
    T denom = tl_sqrt(vu) / sqrt_bc2 + eps;
    p[t] = pv - step_size * mv / denom;
}

template <typename T>
__global__ void adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                            T* __restrict__ vmax, i64 n, T beta1, T one_minus_beta1, T beta2, T one_minus_beta2,
                            T wd, T decay, T sqrt_bc2, T eps, T step_size, int flags) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    adam_update(p, g, m, v, vmax, t, beta1, one_minus_beta1, beta2, one_minus_beta2, wd, decay, sqrt_bc2, eps,
                step_size, flags);
}

template <typename T>
__global__ void adagrad_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sum_sq, i64 n, T clr,
                               T wd, T eps, int flags) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    T pv = p[t];
    T gv = g[t];
    if (flags & 1) gv = gv + wd * pv;
    T s = sum_sq[t] + gv * gv;
    sum_sq[t] = s;
    p[t] = pv - clr * gv / (tl_sqrt(s) + eps);
}

// flags: 1 weight decay, 2 centered (grad_avg), 4 momentum (buf)
template <typename T>
__global__ void rmsprop_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sq_avg,
                               T* __restrict__ buf, T* __restrict__ grad_avg, i64 n, T lr, T alpha,
                               T one_minus_alpha, T eps, T wd, T momentum, int flags) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    T pv = p[t];
    T gv = g[t];
    if (flags & 1) gv = gv + wd * pv;
    T sq = sq_avg[t] * alpha;
    sq += one_minus_alpha * gv * gv;
    sq_avg[t] = sq;
    T avg;
    if (flags & 2) {
        T ga = grad_avg[t] * alpha;
        ga += one_minus_alpha * gv;
        grad_avg[t] = ga;
        avg = tl_sqrt(sq - ga * ga) + eps;
    } else {
        avg = tl_sqrt(sq) + eps;
    }
    if (flags & 4) {
        T b = buf[t] * momentum;
        b += gv / avg;
        buf[t] = b;
        p[t] = pv - lr * b;
    } else {
        p[t] = pv - lr * gv / avg;
    }
}

template <typename T>
__global__ void adadelta_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sq_avg,
                                T* __restrict__ acc_delta, i64 n, T lr, T rho, T one_minus_rho, T eps, T wd,
                                int flags) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    T pv = p[t];
    T gv = g[t];
    if (flags & 1) gv = gv + wd * pv;
    T sq = sq_avg[t] * rho;
    sq += one_minus_rho * gv * gv;
    sq_avg[t] = sq;
    T ad = acc_delta[t];
    T delta = tl_sqrt(ad + eps) / tl_sqrt(sq + eps) * gv;
    ad = ad * rho;
    ad += one_minus_rho * delta * delta;
    acc_delta[t] = ad;
    p[t] = pv - lr * delta;
}

// ---- Adam over many tensors in one launch ----------------------------------------------------
// The table travels by value in the kernel's parameters: MT tensors, each covered by the
// blocks [start[k], start[k + 1]) with MULTI_ILP * blockDim elements per block. The update of
// every element is the one of adam_kernel, in the same order of operations.

#define MT 24
#define MULTI_ILP 4

template <typename T> struct MultiTable {
    T* p[MT];
    const T* g[MT];
    T* m[MT];
    T* v[MT];
    T* vmax[MT];
    i64 n[MT];
    i64 start[MT + 1];
};

// flags: as adam_kernel, plus 8 maximize (g := -g)
template <typename T>
__global__ void adam_multi_kernel(MultiTable<T> tab, int ntensors, T beta1, T one_minus_beta1, T beta2,
                                  T one_minus_beta2, T wd, T decay, T sqrt_bc2, T eps, T step_size, int flags) {
    int k = 0;
    while (k + 1 < ntensors && (i64)blockIdx.x >= tab.start[k + 1]) ++k;
    const i64 n = tab.n[k];
    T* __restrict__ p = tab.p[k];
    const T* __restrict__ g = tab.g[k];
    T* __restrict__ m = tab.m[k];
    T* __restrict__ v = tab.v[k];
    T* __restrict__ vmax = tab.vmax[k];
    const i64 base = ((i64)blockIdx.x - tab.start[k]) * blockDim.x * MULTI_ILP + threadIdx.x;
#pragma unroll
    for (int j = 0; j < MULTI_ILP; ++j) {
        const i64 t = base + (i64)j * blockDim.x;
        if (t >= n) break;
        adam_update(p, g, m, v, vmax, t, beta1, one_minus_beta1, beta2, one_minus_beta2, wd, decay, sqrt_bc2,
                    eps, step_size, flags);
    }
}
