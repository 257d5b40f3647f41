// Fused elementwise kernels: activations and the backward of elementwise ops, one pass each.
// Every thread handles ILP elements strided by blockDim (coalesced), loading all of them
// before computing so that several loads are in flight per thread.

#define ILP 4

// The ops of each kernel, in opcode order. These lists are the one place an op is numbered:
// the enums below are built from them and torchlean/kernels/cuda/elementwise.py reads them
// (build.xmacro), so adding an op is a list entry and its case; an op without a case does not
// compile (the static_asserts).
#define UNARY_OPS(X) X(RELU) X(SIGMOID) X(SOFTPLUS) X(SILU) X(GELU_ERF) X(GELU_TANH) X(SAFE_LOG) X(CLAMP) X(POW) \
    X(ERF) X(TAN) X(ASIN) X(ACOS) X(ATAN) X(SINH) X(COSH) X(ASINH) X(ACOSH) X(ATANH) X(EXPM1) X(LOG1P) X(ERFC) X(ERFINV) \
    X(FLOOR) X(CEIL) X(ROUND) X(TRUNC) X(SIGN) X(NEG) X(ABS) X(SQRT) X(EXP) X(LOG) X(SIN) X(COS) X(TANH) \
    X(RECIP) X(SCALE) X(ADDS)
#define BWD_OPS(X) X(RELU) X(ABS) X(SQRT) X(SIGMOID) X(TANH) X(SOFTPLUS) X(SILU) X(GELU_ERF) X(GELU_TANH) \
    X(SAFE_LOG) X(CLAMP) X(POW)
#define BINARY_OPS(X) X(ADD) X(SUB) X(MUL) X(DIV) X(ATAN2) X(FMOD) X(REMAINDER) X(FLOOR_DIVIDE) X(POWER) \
    X(MAXIMUM) X(MINIMUM)
#define COMPARE_OPS(X) X(LT) X(LE) X(GT) X(GE) X(EQ) X(NE)

#define TL_U(name) U_##name,
#define TL_B(name) B_##name,
#define TL_OP(name) OP_##name,
enum { UNARY_OPS(TL_U) N_UNARY };
enum { BWD_OPS(TL_B) N_BWD };
enum { BINARY_OPS(TL_OP) N_BINARY };
#define TL_C(name) C_##name,
enum { COMPARE_OPS(TL_C) N_COMPARE };
template <int OP> struct tl_no_case { static constexpr bool value = false; };

// float / double overloads of the C math functions the ops below use.
#define TL_MATH1(name, f32, f64) \
    __device__ __forceinline__ float name(float x) { return f32(x); } \
    __device__ __forceinline__ double name(double x) { return f64(x); }
#define TL_MATH2(name, f32, f64) \
    __device__ __forceinline__ float name(float a, float b) { return f32(a, b); } \
    __device__ __forceinline__ double name(double a, double b) { return f64(a, b); }
TL_MATH1(tl_tan, tanf, tan) TL_MATH1(tl_asin, asinf, asin) TL_MATH1(tl_acos, acosf, acos)
TL_MATH1(tl_atan, atanf, atan) TL_MATH1(tl_sinh, sinhf, sinh) TL_MATH1(tl_cosh, coshf, cosh)
TL_MATH1(tl_asinh, asinhf, asinh) TL_MATH1(tl_acosh, acoshf, acosh) TL_MATH1(tl_atanh, atanhf, atanh)
TL_MATH1(tl_expm1, expm1f, expm1) TL_MATH1(tl_erfc, erfcf, erfc) TL_MATH1(tl_erfinv, erfinvf, erfinv)
TL_MATH1(tl_floor, floorf, floor) TL_MATH1(tl_ceil, ceilf, ceil) TL_MATH1(tl_rint, rintf, rint)
TL_MATH1(tl_trunc, truncf, trunc)
TL_MATH2(tl_atan2, atan2f, atan2) TL_MATH2(tl_fmod, fmodf, fmod) TL_MATH2(tl_copysign, copysignf, copysign)

template <typename T> __device__ __forceinline__ T tl_sign(T x) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : (x == T(0) ? T(0) : x));
}

// Python's a % b and a // b for floats (NumPy's npy_divmod, which torch follows): the remainder
// takes b's sign, and the quotient is corrected so that b * q + r == a as closely as rounding allows.
template <typename T> __device__ __forceinline__ T tl_remainder(T a, T b) {
    T m = tl_fmod(a, b);
    if (b == T(0)) return m;
    if (m != T(0)) return ((b < T(0)) != (m < T(0))) ? m + b : m;
    return tl_copysign(T(0), b);
}

template <typename T> __device__ __forceinline__ T tl_floor_divide(T a, T b) {
    if (b == T(0)) return a / b;
    T m = tl_fmod(a, b);
    T d = (a - m) / b;
    if (m != T(0) && ((b < T(0)) != (m < T(0)))) d -= T(1);
    if (d == T(0)) return tl_copysign(T(0), a / b);
    T f = tl_floor(d);
    return (d - f > T(0.5)) ? f + T(1) : f;
}

// ---- forward activations: y = f(x) ---------------------------------------------------------

#define SQRT_2_OVER_PI 0.7978845608028654
#define INV_SQRT_2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327
#define SAFE_LOG_EPS 1e-6

template <typename T, int OP> __device__ __forceinline__ T unary_op(T x, T p0, T p1) {
    if constexpr (OP == U_RELU) return x > T(0) ? x : (tl_isnan(x) ? x : T(0));
    else if constexpr (OP == U_SIGMOID) return tl_sigmoid(x);
    else if constexpr (OP == U_SOFTPLUS) return tl_softplus(x);
    else if constexpr (OP == U_SILU) return x * tl_sigmoid(x);
    else if constexpr (OP == U_GELU_ERF) return T(0.5) * x * (T(1) + tl_erf(x * T(INV_SQRT_2)));
    else if constexpr (OP == U_GELU_TANH)
        return T(0.5) * x * (T(1) + tl_tanh(T(SQRT_2_OVER_PI) * (x + T(0.044715) * x * x * x)));
    else if constexpr (OP == U_SAFE_LOG) return tl_log(tl_softplus(x) + T(SAFE_LOG_EPS));
    else if constexpr (OP == U_CLAMP) {  // NumPy's clip: min(max(x, lo), hi), NaN passes through
        T t = x < p0 ? p0 : x;
        return t > p1 ? p1 : t;
    } else if constexpr (OP == U_POW) return tl_pow(x, p0);
    else if constexpr (OP == U_ERF) return tl_erf(x);
    else if constexpr (OP == U_TAN) return tl_tan(x);
    else if constexpr (OP == U_ASIN) return tl_asin(x);
    else if constexpr (OP == U_ACOS) return tl_acos(x);
    else if constexpr (OP == U_ATAN) return tl_atan(x);
    else if constexpr (OP == U_SINH) return tl_sinh(x);
    else if constexpr (OP == U_COSH) return tl_cosh(x);
    else if constexpr (OP == U_ASINH) return tl_asinh(x);
    else if constexpr (OP == U_ACOSH) return tl_acosh(x);
    else if constexpr (OP == U_ATANH) return tl_atanh(x);
    else if constexpr (OP == U_EXPM1) return tl_expm1(x);
    else if constexpr (OP == U_LOG1P) return tl_log1p(x);
    else if constexpr (OP == U_ERFC) return tl_erfc(x);
    else if constexpr (OP == U_ERFINV) return tl_erfinv(x);
    else if constexpr (OP == U_FLOOR) return tl_floor(x);
    else if constexpr (OP == U_CEIL) return tl_ceil(x);
    else if constexpr (OP == U_ROUND) return tl_rint(x);  // half to even, as torch.round
    else if constexpr (OP == U_TRUNC) return tl_trunc(x);
    else if constexpr (OP == U_SIGN) return T((x > T(0)) - (x < T(0)));  // torch's: NaN gives 0
    else if constexpr (OP == U_NEG) return -x;
    else if constexpr (OP == U_ABS) return x < T(0) ? -x : (x == T(0) ? T(0) : x);  // |-0| = +0, NaN kept
    else if constexpr (OP == U_SQRT) return tl_sqrt(x);
    else if constexpr (OP == U_EXP) return tl_exp(x);
    else if constexpr (OP == U_LOG) return tl_log(x);
    else if constexpr (OP == U_SIN) return sin(x);
    else if constexpr (OP == U_COS) return cos(x);
    else if constexpr (OP == U_TANH) return tl_tanh(x);
    else if constexpr (OP == U_RECIP) return T(1) / x;
    else if constexpr (OP == U_SCALE) return x * p0;
    else if constexpr (OP == U_ADDS) return x + p0;
    else static_assert(tl_no_case<OP>::value, "a UNARY_OPS entry without a case in unary_op");
}

template <typename T, int OP>
__global__ void unary_kernel(const T* __restrict__ x, T* __restrict__ y, i64 n, T p0, T p1) {
    const i64 base = (i64)blockIdx.x * blockDim.x * ILP + threadIdx.x;
    T v[ILP];
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        i64 i = base + (i64)k * blockDim.x;
        v[k] = i < n ? x[i] : T(0);
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        i64 i = base + (i64)k * blockDim.x;
        if (i < n) y[i] = unary_op<T, OP>(v[k], p0, p1);
    }
}

// ---- backward: out = g * f'(a) where a is the saved input x or output y ----------------------

template <typename T, int OP> __device__ __forceinline__ T bwd_op(T a, T g, T p0, T p1, int flags) {
    if constexpr (OP == B_RELU) return a > T(0) ? g : T(0);
    else if constexpr (OP == B_ABS) return g * tl_sign(a);
    else if constexpr (OP == B_SQRT) return a > T(0) ? (T(0.5) * g) / a : T(0);
    else if constexpr (OP == B_SIGMOID) return g * a * (T(1) - a);
    else if constexpr (OP == B_TANH) return g * (T(1) - a * a);
    else if constexpr (OP == B_SOFTPLUS) return g * tl_sigmoid(a);
    else if constexpr (OP == B_SILU) {
        T s = tl_sigmoid(a);
        return g * s * (T(1) + a * (T(1) - s));
    } else if constexpr (OP == B_GELU_ERF) {
        T cdf = T(0.5) * (T(1) + tl_erf(a * T(INV_SQRT_2)));
        return g * (cdf + a * tl_exp(T(-0.5) * a * a) * T(INV_SQRT_2PI));
    } else if constexpr (OP == B_GELU_TANH) {
        const T c = T(SQRT_2_OVER_PI), k = T(0.044715);
        T t = tl_tanh(c * (a + k * a * a * a));
        T d = T(0.5) * (T(1) + t) + T(0.5) * a * (T(1) - t * t) * c * (T(1) + T(3) * k * a * a);
        return g * d;
    } else if constexpr (OP == B_SAFE_LOG) return g * tl_sigmoid(a) / (tl_softplus(a) + T(SAFE_LOG_EPS));
    else if constexpr (OP == B_CLAMP) {  // flags bit 0: lo given, bit 1: hi given; strictly inside passes g
        bool inside = (!(flags & 1) || a > p0) && (!(flags & 2) || a < p1);
        return inside ? g : T(0);
    } else if constexpr (OP == B_POW) {  // p0 = p (p == 0 is handled on the host)
        if (flags & 1) return T(2) * g * a;  // p == 2
        return g * p0 * tl_pow(a, p0 - T(1));
    } else static_assert(tl_no_case<OP>::value, "a BWD_OPS entry without a case in bwd_op");
}

template <typename T, int OP>
__global__ void bwd_kernel(const T* __restrict__ a, const T* __restrict__ g, T* __restrict__ out, i64 n,
                           T p0, T p1, int flags) {
    const i64 base = (i64)blockIdx.x * blockDim.x * ILP + threadIdx.x;
    T va[ILP], vg[ILP];
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        i64 i = base + (i64)k * blockDim.x;
        va[k] = i < n ? a[i] : T(0);
        vg[k] = i < n ? g[i] : T(0);
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        i64 i = base + (i64)k * blockDim.x;
        if (i < n) out[i] = bwd_op<T, OP>(va[k], vg[k], p0, p1, flags);
    }
}

// ---- elementwise max/min backward: ties split the cotangent 1/2 - 1/2 ------------------------
template <typename T>
__global__ void minmax_bwd_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ g,
                                  T* __restrict__ ga, T* __restrict__ gb, i64 n, int is_max) {
    const i64 base = (i64)blockIdx.x * blockDim.x * ILP + threadIdx.x;
    T va[ILP], vb[ILP], vg[ILP];
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        i64 i = base + (i64)k * blockDim.x;
        va[k] = i < n ? a[i] : T(0);
        vb[k] = i < n ? b[i] : T(0);
        vg[k] = i < n ? g[i] : T(0);
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        i64 i = base + (i64)k * blockDim.x;
        if (i < n) {
            bool win = is_max ? (va[k] > vb[k]) : (va[k] < vb[k]);
            T wa = win ? T(1) : (va[k] == vb[k] ? T(0.5) : T(0));
            ga[i] = vg[k] * wa;
            gb[i] = vg[k] * (T(1) - wa);
        }
    }
}

// ---- same-dtype binary arithmetic: one launch instead of CuPy's generic ufunc dispatch ---------

#define BIN_ILP 4

// MODE 0: same shape; 1: b is a scalar; 2: a is a scalar; 3: b is a row repeated over `cols`.
template <typename T, int OP> __device__ __forceinline__ T bin_op(T a, T b) {
    if constexpr (OP == OP_ADD) return a + b;
    else if constexpr (OP == OP_SUB) return a - b;
    else if constexpr (OP == OP_MUL) return a * b;
    else if constexpr (OP == OP_DIV) return a / b;
    else if constexpr (OP == OP_ATAN2) return tl_atan2(a, b);
    else if constexpr (OP == OP_FMOD) return tl_fmod(a, b);
    else if constexpr (OP == OP_REMAINDER) return tl_remainder(a, b);
    else if constexpr (OP == OP_FLOOR_DIVIDE) return tl_floor_divide(a, b);
    else if constexpr (OP == OP_POWER) return tl_pow(a, b);
    else if constexpr (OP == OP_MAXIMUM) return tl_isnan(a) ? a : (tl_isnan(b) ? b : (a < b ? b : a));
    else if constexpr (OP == OP_MINIMUM) return tl_isnan(a) ? a : (tl_isnan(b) ? b : (b < a ? b : a));
    else static_assert(tl_no_case<OP>::value, "a BINARY_OPS entry without a case in bin_op");
}

template <typename T, int OP, int MODE>
__global__ void binary_kernel(const T* a, const T* b, T* out, i64 n, i64 cols) {
    const i64 base = (i64)blockIdx.x * blockDim.x * BIN_ILP + threadIdx.x;
    T va[BIN_ILP], vb[BIN_ILP];
#pragma unroll
    for (int k = 0; k < BIN_ILP; ++k) {
        const i64 i = base + (i64)k * blockDim.x;
        if (i < n) {
            va[k] = MODE == 2 ? a[0] : a[i];
            vb[k] = MODE == 1 ? b[0] : (MODE == 3 ? b[i % cols] : b[i]);
        }
    }
#pragma unroll
    for (int k = 0; k < BIN_ILP; ++k) {
        const i64 i = base + (i64)k * blockDim.x;
        if (i < n) out[i] = bin_op<T, OP>(va[k], vb[k]);
    }
}


// ---- comparisons of floats: IEEE (subnormals compare as themselves), bool (one byte) out -----
template <typename T, int OP> __device__ __forceinline__ bool cmp_op(T a, T b) {
    if constexpr (OP == C_LT) return a < b;
    else if constexpr (OP == C_LE) return a <= b;
    else if constexpr (OP == C_GT) return a > b;
    else if constexpr (OP == C_GE) return a >= b;
    else if constexpr (OP == C_EQ) return a == b;
    else if constexpr (OP == C_NE) return a != b;
    else static_assert(tl_no_case<OP>::value, "a COMPARE_OPS entry without a case in cmp_op");
}

// The layouts of binary_kernel (MODE 0-3).
template <typename T, int OP, int MODE>
__global__ void compare_kernel(const T* a, const T* b, unsigned char* out, i64 n, i64 cols) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        T va = MODE == 2 ? a[0] : a[i];
        T vb = MODE == 1 ? b[0] : (MODE == 3 ? b[i % cols] : b[i]);
        out[i] = cmp_op<T, OP>(va, vb);
    }
}

// ---- float32 <-> float64 with IEEE conversion (CuPy's astype flushes float32 subnormals) ------
template <typename S, typename D>
__global__ void cast_kernel(const S* __restrict__ x, D* __restrict__ y, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (D)x[i];
}

// float -> bool: nonzero (IEEE: a subnormal is nonzero; NaN is nonzero, as NumPy's astype(bool))
template <typename T>
__global__ void to_bool_kernel(const T* __restrict__ x, unsigned char* __restrict__ y, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] != T(0);
}
