"""CUDA graph capture of max pooling's host algorithm over CuPy, piece by piece: which CuPy operation
needs a host-to-device transfer (refused while a stream captures).

    python benchmarks/probe_capture_pool.py
"""
import cupy, numpy as np
from torchlean.kernels.host import conv as H
x = cupy.random.standard_normal((8, 4, 16, 16), dtype=np.float32)
g = cupy.random.standard_normal((8, 4, 8, 8), dtype=np.float32)
def attempt(name, fn):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        fn()  # warm
        s.synchronize()
        s.begin_capture()
        try:
            fn()
            ok = "ok"
        except Exception as e:
            ok = f"FAIL {type(e).__name__}: {str(e)[:90]}"
        finally:
            try:
                s.end_capture()
            except Exception as e:
                ok += f" / end: {str(e)[:60]}"
    print(f"{name:30s} {ok}")
w = H._windows(x, (2, 2), (2, 2), (1, 1), (8, 8), xp=cupy)
cols = w.reshape(w.shape[:2] + (8, 8, 4))
idx = cupy.argmax(cols, axis=-1)
attempt("windows+reshape", lambda: H._windows(x, (2, 2), (2, 2), (1, 1), (8, 8), xp=cupy).reshape(w.shape[:2] + (8, 8, 4)))
attempt("argmax", lambda: cupy.argmax(cols, axis=-1))
attempt("take_along_axis", lambda: cupy.take_along_axis(cols, idx[..., None], axis=-1))
attempt("max", lambda: cols.max(axis=-1))
attempt("forward", lambda: H.max_pool_forward(x, (2, 2), (2, 2), (0, 0), (1, 1), xp=cupy))
attempt("backward", lambda: H.max_pool_backward(g, idx, x.shape, (2, 2), (2, 2), (0, 0), (1, 1), xp=cupy))
attempt("where numpy scalar", lambda: cupy.where(idx == 0, g, np.float32(0)))
# Expected on CuPy 14: only "windows+reshape" fails (a copy of the 2d-dimensional window view
# transfers its strides from the host); max_pool_forward no longer uses it.
